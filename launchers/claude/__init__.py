"""Coming from Claude Code: ``harness-sandbox import claude``, its conversion of settings
files and hook commands, the files it copies, and the porting lint."""
