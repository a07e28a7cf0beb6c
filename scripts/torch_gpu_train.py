"""PyTorch's figures beside gpu_benchmark's, on the same GPU, fed from host
memory every step as graphrun is, fetching the loss every step:
  * the MLP 784-256-256-10, batch 256, SGD 0.1;
  * the CNN of `graphrun train --model=cnn`, NHWC 28x28x1 as graphrun
    feeds it (channels_last memory): 4 Conv3x3-BN-ReLU blocks (32, 32, 64,
    64 filters, no conv bias), max pool 2x2 after the 2nd and the 4th,
    dropout 0.5, dense 512 ReLU, dense 10; batch 128, SGD 0.05.
Median examples/s of 5 runs of 50 steps after 20 warm-up steps."""
import statistics
import sys
import time

import torch

if not torch.cuda.is_available():
    print("torch_gpu_train: no GPU")
    sys.exit(1)
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False  # graphrun's convolutions: FMA math
torch.backends.cudnn.benchmark = True


def block(cin, cout):
    return [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            torch.nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01), torch.nn.ReLU()]


def measure(name, model, x, y, lr, channels_last=False):
    model = model.to(dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        xs = x.to(dev)
        if channels_last:
            xs = xs.permute(0, 3, 1, 2)  # NHWC in memory, NCHW logically
        loss = loss_fn(model(xs), y.to(dev))
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(20):
        step()
    rates = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(50):
            step()
        rates.append(50 * x.shape[0] / (time.perf_counter() - start))
    print(f"{name}: PyTorch GPU {statistics.median(rates):.0f} examples/s")


mlp = torch.nn.Sequential(
    torch.nn.Linear(784, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 10))
measure("mlp 784-256-256-10 batch 256 sgd", mlp, torch.rand(256, 784),
        torch.arange(256) % 10, 0.1)
cnn = torch.nn.Sequential(
    *block(1, 32), *block(32, 32), torch.nn.MaxPool2d(2),
    *block(32, 64), *block(64, 64), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Dropout(0.5),
    torch.nn.Linear(7 * 7 * 64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
measure("cnn 28x28x1 conv32-32-64-64 dense512 batch 128 sgd", cnn,
        torch.rand(128, 28, 28, 1), torch.arange(128) % 10, 0.05, channels_last=True)
