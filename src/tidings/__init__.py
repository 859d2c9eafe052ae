"""Tidings: publish/subscribe with topic, content and function matching over durable queues."""

__version__ = "0.1.0"
