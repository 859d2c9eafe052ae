// Sample inputs one click away: the thesis's evaluation application published sensor
// readings by topic, offers by content (computer, money), and text and images for the
// function library (docs/functions.md).
export const PUBLICATIONS = {
  topic: {
    label: "Topic: a kitchen temperature",
    topics: "home/kitchen/temp",
    attributes: "",
    functionTypes: "",
    data: '{"temp": 21.5, "unit": "C"}',
  },
  content: {
    label: "Content: an offer (the thesis's listing)",
    topics: "",
    attributes: '{"computer": "Intel", "money": 20000}',
    functionTypes: "",
    data: '"An Intel computer for 20000"',
  },
  text: {
    label: "Text: the DEBS 2018 sentence",
    topics: "",
    attributes: "",
    functionTypes: "text",
    data: '"DEBS2018 will be held at the University of Waikato in New Zealand."',
  },
};

export const SUBSCRIPTIONS = {
  topic: { topics: "home/#" },
  content: [{ key: "money", op: ">", value: "10000" }, { key: "computer", op: "=", value: '"Intel"' }],
  code: [
    "POPULATION = {\"New Zealand\": 4_900_000, \"Waikato\": 500_000}",
    "",
    "def match(publication):",
    "    text = publication[\"data\"]",
    "    return isinstance(text, str) and any(p in text for p in POPULATION)",
    "",
  ].join("\n"),
};

// The library's functions and an example of each one's params (docs/functions.md).
export const BUILTINS = {
  detect_language: { language: "en" },
  key_phrases: { any_of: ["university"] },
  sentiment: { label: "positive" },
  detect_faces: { min_faces: 1 },
  detect_printed_text: {},
  analyze_image: { has: ["faces"] },
};

export const OPERATORS = ["=", "!=", "<", "<=", ">", ">=", "in", "prefix", "suffix", "contains", "exists"];

export const SIMULATION = {
  name: "console-sample",
  duration: 10,
  drain: 10,
  subscribers: [
    { count: 10, topics: ["home/#"] },
    { count: 5, predicates: [{ key: "temp", op: ">", value: 25 }] },
  ],
  publishers: [
    { count: 2, rate: 20, topics: ["home/kitchen/temp", "home/hall/temp"], pick_topic: true,
      attributes: { temp: { uniform: [15, 35] } }, payload_bytes: 256 },
  ],
};

// The thesis's own format (its figure 5.8): the broker turns it into the native one.
export const THESIS_SIMULATION = {
  providerType: "Tidings",
  applicationMode: "Simulator",
  nodesCount: 10,
  topicsMetadata: { nodesCount: 10, topics: ["Sport", "Music"] },
  duration: 10,
  rate: 5,
};
