"""The broker: the stateless operations, composed from collaborators that each hold one
policy. `Broker` (operations.py) knows them all and decides nothing itself.

| module           | holds                                                                  |
|------------------|------------------------------------------------------------------------|
| operations.py    | `Broker`: register, subscribe, publish, pull, ack ... as composition   |
| lifecycle.py     | start and close: the store's watch, background tasks, the stateless path |
| registry.py      | subscribers and subscriptions: registered, subscribed, looked up, undone |
| publishing.py    | a batch of publications to the queues: access, dedup, routing, owing    |
| following.py     | the index kept in line with the store's subscriptions (change log)     |
| index.py         | the process-local subscription index (kinds, Matcher, function index)   |
| routing.py       | the matching mode behind one seam: local, elastic or Spark              |
| functions.py     | function subscriptions: evaluation after the answer, suspension         |
| access.py        | the registration and publisher keys an operator may require            |
| auth.py          | subscribers' and the admin's tokens, the token cache, revocations       |
| quotas.py        | what one subscriber may hold, registrations, streams, the disk alarm   |
| rates.py         | token buckets by key (a client's address)                              |
| housekeeping.py  | the background cadence: retention, presence, other brokers' changes    |
| alarms.py        | warnings for operators (dead letters in bursts)                        |
| overview.py      | the operator's view: subscriber pages, metrics gauges, readiness       |
| telemetry.py     | one observer for metrics and the event logs                            |
| placement_state.py | the last placement state the controller published (placement/state)  |
| dedup.py         | publishers' dedup ids: claimed in the commit that enqueues, answered   |

Below the broker: `tidings.delivery` (queues, group commit, push channels), `tidings.store`
(behind `Store`, awaited through `AsyncStore`), `tidings.matching`, `tidings.sandbox`.
"""

from tidings.broker.operations import Broker
from tidings.broker.publishing import PublicationInput, Published

__all__ = ["Broker", "PublicationInput", "Published"]
