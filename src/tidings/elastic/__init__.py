"""Elastic matching (E-SilboPS): the broker's topic and content matching spread over
operators that scale out and in while publications flow (docs/elastic.md).

Where is what:

- `operators/`: the three kinds of operator and what they share. `operator` (the base: an
  inbox loop, outboxes, a coordinator session, the scale watch), `access_point`,
  `matcher` (the matching loop; `matcher_scale`: its part of a matcher scale or a
  recovery; `slices`: the subscriptions it holds per view), `exit_point`.
- `protocol/`: what the operators say to each other and the rules they follow. `wire` (the
  messages, MessagePack), `channels` (FIFO channels over ZeroMQ), `partition` (selectors:
  which matcher, which exit point), `cuts` (which exit point view delivers a publication),
  `scaling` (the section 5 scaling protocols, phase by phase, as the `Scaler` drives them).
- `coordination/`: ZooKeeper. `coordinator` (one session: configuration, membership, scale
  records and barriers, watches, leads), `records` (what it keeps: the configuration, the
  members, the scale), `barriers` (the wait at a scale's barrier), `zookeeper` (a
  standalone one for tests and `serve`), `warden` (a scale whose scaler died is taken over).
- `hosting/`: where operators run. `deployment` (one process's operators and the scaler,
  with `recovery`, the recovery of lost members, and `evictions`, the other processes'
  operators watched and evicted when unreachable, through `liveness`), `process` (one
  operator as a process of its own), `seam` (what `Broker` is given with
  `matching = "elastic"`), `autoscaler` (the policy that asks for scales).
- `tasks`: ending a background task (cancelled, awaited, its error logged), for all of them.

The data path: the broker hands a publication to an access point, which numbers it and
broadcasts it to every matcher of the current view (`wire.Publish`); each matcher matches
it against its slice of the subscriptions (an access point routed each subscription to one
matcher by the selector) and sends each exit point its share of the result
(`wire.Partials`); an exit point merges the partials of every matcher, enqueues the
deliveries in the store in each access point's order, and tells the access point
(`wire.Committed`), which then answers the publisher.

The coordinator holds the views (which operators are matchers, exit points, access points)
and each scale's phase; operators watch it and act on each phase. A scale (more or fewer
matchers or exit points) moves state and markers between operators through the same
channels as the publications, so that nothing is lost or delivered twice; a recovery is a
matcher scale that replaces lost operators (`protocol.scaling`).
"""
