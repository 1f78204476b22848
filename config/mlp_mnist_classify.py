# Image MLP, generative classification: a digit -> its class prototype (one training image per
# class, drawn with a fixed seed), the paper's protocol (arXiv:2510.01796, A.3.2: batch 128,
# 50 epochs). Scored by PSNR against the prototype, and by nearest-prototype accuracy (ours).
# The one place this task's protocol is written: train_mlp.py --task=mnist_classify reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_mnist_classify.py
task = "mnist_classify"
epochs = 50
batch_size = 128
flips = 1  # a flipped input would need a flipped prototype: no augmentation here
learning_rate = 1e-3
eval_interval = 0  # validate once per epoch
dtype = "float32"  # as the reference code trains; --dtype=auto: bf16 where the hardware has it
shape = "hourglass"
latent_dim = 2048
hidden_dim = 128
n_blocks = 4
out_dir = "out/mlp_mnist_classify"
