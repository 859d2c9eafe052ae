"""Matching: pure code (no I/O, no asyncio, no database).

`semantics` states what a match is; `topics` and `content` index subscriptions so that a
publication is matched without testing every subscription; `engine.Matcher` composes both.
"""
