"""What the walk knows: values and their joins (values.py, lattice.py), scopes, expressions and
the torch API, containers (containers.py: lists, tuples, dicts, module containers), calls and
summaries, objects and modules (instances.py: what a construction binds on self; layersaves.py and
weights.py: what layers save for backward; multiviews.py: the parts of chunk/split/unbind; customviews.py: views made inside
a custom Function, a Function's or a full backward hook's), loops,
training events (see the file names)."""
