"""
The plumbing under the papers and the commands: what keeps a run safe and its numbers honest,
read when you care how, never needed to read a paper's file. Nothing here imports the top level
(tests/test_layout.py); what it needs of a model (its classes) is passed in.

    configurator.py  config files as data, --key=value, --help; train.py's defaults and checks;
                     `build`: a model from its classes, a bad setting worded as one line
    run.py           a run's folder, how it ends (divergence, signals), its time plan, the one
                     resume policy of both trainers, RNG states
    checkpoint.py    every file written whole (write_atomic), checkpoints saved and loaded
                     safely, exported folders
    lock.py          one process per folder (flock / msvcrt), a lock a symlink cannot redirect
    dataset.py       finding, checking and loading the prepared text and image datasets
    tokenizer.py     characters or GPT-2 BPE, from a dataset's meta.json
    hardware.py      the device 'auto' picks, dtype, autocast, peak FLOP/s for MFU
    image_tasks.py   the image MLP's tasks: degradations, PSNR / SSIM, batches
    pages.py         generated blocks: the numbers a page quotes, written by the command that
                     computes them
    sweep.py         many train.py runs side by side: resume, records (machine, commit), stopping
    verdict.py       a rate per shape, then the verdict over seeds with intervals
    report.py        a comparison's report: its tables, its parts, what results.json holds, the
                     pages' blocks of a records folder
    controls.py      what a shape's difference is made of: the controls' differences and shares
    cost.py          each shape's loss at the baseline's training time and FLOPs
    looks.py         two verdicts of one comparison read together (python -m shapelab.looks)
    plot.py          loss curves and verdict pictures (python -m shapelab.plot OUT_DIR ...)
"""
