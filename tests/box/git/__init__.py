"""What protects git's inputs (``sandbox/git/``): attacks made from a real box, the
reports at a session's end, git's own files read without git."""
