# Image MLP, 2x super-resolution of ImageNet-32 (bicubic 16x16x3 -> 32x32x3), the paper's
# protocol (arXiv:2510.01796, A.3.2: batch 512, 2 epochs, x4 flips), the same hourglass shape as
# its denoiser (d_z 3546, d_h 270, L 5; its Table 2 row at 23.19M). A GPU job.
# The one place this task's protocol is written: train_mlp.py --task=imagenet32_sr reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_imagenet32_sr.py --data_dir=/path/to/imagenet32
task = "imagenet32_sr"
epochs = 2
batch_size = 512
flips = 4
learning_rate = 5e-4
eval_interval = 1000
dtype = "float32"  # as the reference code trains; --dtype=auto: bf16 where the hardware has it
shape = "hourglass"
latent_dim = 3546
hidden_dim = 270
n_blocks = 5
out_dir = "out/mlp_imagenet32_sr"
