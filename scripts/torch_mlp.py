"""PyTorch's figure beside gpu_benchmark's: the MLP 784-256-256-10, batch
256, SGD 0.1, fed from host memory every step as graphrun is; median
examples/s of 5 runs of 50 steps after 20 warm-up steps."""
import statistics
import sys
import time

import torch

if not torch.cuda.is_available():
    print("torch_mlp: no GPU")
    sys.exit(1)
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(
    torch.nn.Linear(784, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.rand(256, 784)
y = torch.arange(256) % 10


def step():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x.to(dev)), y.to(dev))
    loss.backward()
    opt.step()
    return loss.item()  # graphrun fetches the loss every step too


for _ in range(20):
    step()
rates = []
for _ in range(5):
    start = time.perf_counter()
    for _ in range(50):
        step()
    rates.append(50 * 256 / (time.perf_counter() - start))
print(f"mlp 784-256-256-10 batch 256 sgd: PyTorch GPU {statistics.median(rates):.0f} examples/s")
