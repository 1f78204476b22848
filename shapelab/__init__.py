"""
The plumbing under the papers and the commands: settings, runs, checkpoints, datasets, tokenizers,
devices, and the comparisons' statistics, reports, pictures and generated page blocks. Nothing
here imports the top level; what it needs of a model is passed in.
"""
