"""The edges: the Hub, the database, delivery, feeds, OSV.dev, settings, metrics."""
