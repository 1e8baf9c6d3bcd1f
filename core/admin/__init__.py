"""Operators' tools: the stats report, hot keys, and every bad option of a settings file."""
