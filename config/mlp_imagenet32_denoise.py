# Image MLP, denoising 32x32x3 ImageNet-32 images (sigma 0.25), the paper's protocol
# (arXiv:2510.01796, A.3.2: batch 512, 2 epochs, x4 flips) and the hourglass shape of its Table 1
# (denoising: d_z 3546, d_h 270, L 5: 31.36M parameters, 20.47M trainable). A GPU job: 1.28M
# images x 4.
# The one place this task's protocol is written: train_mlp.py --task=imagenet32_denoise reads its
# unset (None) settings from here.
#   python train_mlp.py config/mlp_imagenet32_denoise.py --data_dir=/path/to/imagenet32
base = "mlp_imagenet32_sr.py"  # every setting not below
task = "imagenet32_denoise"
noise_sigma = 0.25
out_dir = "out/mlp_imagenet32_denoise"
