"""P36 probe: a training step captured and replayed like tools/bench/torch_step.py --mode graph,
with a model that uses cuBLAS (linear) or none (elementwise)."""
import sys, time, torch
kind, seconds = sys.argv[1], float(sys.argv[2])
torch.manual_seed(0)
W, B = 256, 64
if kind == "linear":
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(W, W), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    params = list(model.parameters())
    fwd = model
else:
    ws = [torch.nn.Parameter(torch.randn(W, device="cuda")) for _ in range(6)]
    bs = [torch.nn.Parameter(torch.zeros(W, device="cuda")) for _ in range(6)]
    params = ws + bs
    def fwd(x):
        for w, b in zip(ws, bs):
            x = torch.relu(x * w + b)
        return x
opt = torch.optim.SGD(params, lr=1e-3, foreach=True)
x = torch.randn(B, W, device="cuda"); y = torch.randn(B, W, device="cuda")
loss_fn = torch.nn.MSELoss()
def step():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(fwd(x), y); loss.backward(); opt.step()
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3): step()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g):
    l = loss_fn(fwd(x), y); l.backward(); opt.step()
torch.cuda.synchronize()
n = 0; end = time.perf_counter() + seconds
while time.perf_counter() < end:
    g.replay(); torch.cuda.synchronize(); n += 1
print("P36", kind, "replays", n)
