# Image MLP, generative classification: a digit -> its class prototype (one training image per
# class, drawn with a fixed seed), the paper's protocol (arXiv:2510.01796, A.3.2: batch 128,
# 50 epochs). Scored by PSNR against the prototype, and by nearest-prototype accuracy (ours).
# The one place this task's protocol is written: train_mlp.py --task=mnist_classify reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_mnist_classify.py
base = "mlp_mnist_sr.py"  # every setting not below
task = "mnist_classify"
flips = 1  # a flipped input would need a flipped prototype: no augmentation here
out_dir = "out/mlp_mnist_classify"
