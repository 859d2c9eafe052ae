"""ZooKeeper as the distributed coordinator: one session's configuration, membership, scale
records and leads (`coordinator`), the records it keeps (`records`), the wait at a scale's
barrier (`barriers`), a ZooKeeper of its own (`zookeeper`), and the takeover of a scale
whose scaler died (`warden`)."""
