"""Helpers shared by the tests: trees of files and links, processes, hook programs."""
