"""ZooKeeper as the distributed coordinator: configuration, membership, scale records and
their barriers (`coordinator`), a ZooKeeper of its own (`zookeeper`), and the takeover of
a scale whose scaler died (`warden`)."""
