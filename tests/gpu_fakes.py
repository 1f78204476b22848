"""What a GPU run would differ in, faked on a CPU for tests/test_train_gpu_paths.py: torch.cuda's
answers, torch.compile, torch.load's device, the peak FLOP/s, the GradScaler's state. `fake` sets
each named patch with the `setattr` it is given (a test's monkeypatch.setattr, undone after the
test, or the builtin in a process of its own) and records what the script did in `report`."""

import os
import sys

import torch


def fake(patches, report, script, setattr):
    """Apply `patches` (names, below) for a run of `script`; what it did lands in `report`."""
    patches = set(patches)
    if "fake_cuda" in patches:  # a T4 / V100: CUDA is there, bf16 only through emulation
        setattr(torch.cuda, "is_available", lambda: True)
        setattr(torch.cuda, "is_bf16_supported",
                lambda including_emulation=True: including_emulation)
    if "compile" in patches:  # record what is compiled, run it eagerly
        def fake_compile(module, *args, **kwargs):
            report.setdefault("compiled", []).append(type(module).__name__)
            return module
        setattr(torch, "compile", fake_compile)
    if "peak" in patches:  # a known peak, so the test can recompute MFU
        from shapelab import hardware
        setattr(hardware, "peak_flops", lambda device_type: (1e12, "test peak 1 TFLOP/s"))
    if "load" in patches:  # a load for a device that is not the CPU lands elsewhere (here: 'meta')
        real_load, real_set_rng_state = torch.load, torch.set_rng_state

        def load(*args, map_location=None, **kwargs):
            report.setdefault("map_location", []).append(str(map_location))
            return real_load(*args, **kwargs,
                             map_location=map_location if str(map_location) == "cpu" else "meta")

        def set_rng_state(state):
            report.setdefault("rng_state", []).append([str(state.device), str(state.dtype)])
            return real_set_rng_state(state)
        setattr(torch, "load", load)
        setattr(torch, "set_rng_state", set_rng_state)
    if "scaler" in patches:  # a float16 run's GradScaler: what is saved, what a resume restores
        setattr(torch.amp.GradScaler, "state_dict", lambda self: {
            "scale": 512.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
            "_growth_tracker": 7})
        setattr(torch.amp.GradScaler, "load_state_dict",
                lambda self, state: report.setdefault("scaler_loaded", []).append(state))
    if "stop_after_load" in patches:  # sample.py: what does the model get built from?
        import shapes

        def model_from_checkpoint(ckpt, path="the checkpoint"):
            report["devices"] = sorted({str(t.device) for t in ckpt["model"].values()})
            report["has_optimizer"] = "optimizer" in ckpt
            report["dtype"] = sys._getframe(1).f_globals.get("dtype")  # sample.py's dtype=auto
            raise SystemExit(0)
        setattr(shapes, "model_from_checkpoint", model_from_checkpoint)
    if "count_syncs" in patches:  # host syncs asked for by the script itself, per optimizer step
        script_file = os.path.realpath(script)
        steps = report["syncs_per_step"] = [0]

        def counting(method):
            def wrapper(self, *args, **kwargs):
                if os.path.realpath(sys._getframe(1).f_code.co_filename) == script_file:
                    steps[-1] += 1
                return method(self, *args, **kwargs)
            return wrapper
        for name in ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy"):
            setattr(torch.Tensor, name, counting(getattr(torch.Tensor, name)))
        real_step = torch.optim.AdamW.step

        def step(self, *args, **kwargs):  # syncs counted from here on belong to the next step
            out = real_step(self, *args, **kwargs)
            steps.append(0)
            return out
        setattr(torch.optim.AdamW, "step", step)
    if "sample_vocab" in patches:  # what the closing sample asks generate for, and what it gets
        import model
        from shapelab import tokenizer
        real_generate = model.GPT.generate

        def generate(self, *args, **kwargs):
            ids = real_generate(self, *args, **kwargs)
            report["generate_vocab_size"] = kwargs.get("vocab_size")
            report["largest_sampled_id"] = int(ids.max())
            return ids
        setattr(model.GPT, "generate", generate)

        class StubGPT2:  # no download in a test: ids only
            vocab_size = 50257

            def encode(self, text):
                return [198]

            def decode(self, ids):
                return " ".join(map(str, ids))
        setattr(tokenizer.Tokenizer, "gpt2", classmethod(lambda cls: StubGPT2()))
