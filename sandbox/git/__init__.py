"""What protects git's inputs: the layout of a project's git folders and what in them host git
reads to decide what to run, the config keys that name programs, what git in the box
sees of a module's config, the report of what the box could not stop, and the options
that make the toolkit's own git run nothing."""
