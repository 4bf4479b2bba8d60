"""What the walk knows: values and their joins (values.py, lattice.py), scopes, expressions and
the torch API, containers (containers.py: lists, tuples, dicts, module containers), calls and
summaries, objects and modules, loops, training events (see the file names)."""
