"""What the walk knows: values, scopes, expressions and the torch API, calls and summaries,
objects and modules, loops, training events (see the file names)."""
