"""Coming from Claude Code: ``import claude``, the copies it makes, the porting lint."""
