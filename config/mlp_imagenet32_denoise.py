# Image MLP, denoising 32x32x3 ImageNet-32 images (sigma 0.25), the paper's protocol
# (arXiv:2510.01796, A.3.2: batch 512, 2 epochs, x4 flips) and the hourglass shape of its Table 1
# (denoising: d_z 3546, d_h 270, L 5: 31.36M parameters, 20.47M trainable). A GPU job: 1.28M
# images x 4.
# The one place this task's protocol is written: train_mlp.py --task=imagenet32_denoise reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_imagenet32_denoise.py --data_dir=/path/to/imagenet32
task = "imagenet32_denoise"
noise_sigma = 0.25
epochs = 2
batch_size = 512
flips = 4
learning_rate = 5e-4  # inside the paper's ImageNet-32 grid {1e-4, 3e-4, 5e-4, 7e-4}
eval_interval = 1000
dtype = "float32"  # as the reference code trains; --dtype=auto: bf16 where the hardware has it
shape = "hourglass"
latent_dim = 3546
hidden_dim = 270
n_blocks = 5
out_dir = "out/mlp_imagenet32_denoise"
