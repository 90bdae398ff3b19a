"""An experiment for the benchmarks: CLAP's audio model replayed from a captured CUDA graph.

A forward of the full-size model launches about a thousand kernels, each from Python: among busy
item threads, the device thread must win the interpreter lock back for every one.  Replaying a
graph captured once per batch shape launches them all in one call.  ``graphed_clap()`` makes every
``HFClap`` loaded inside it replay its audio model that way (CUDA only; elsewhere it changes
nothing), so ``clap_frontend.py`` and ``device_contention.py`` can measure what that would save
before the backend does it itself.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from mmverify.models.clap_hf import HFClap


class GraphedAudioFeatures:
    """``model.get_audio_features`` replayed from a graph captured per input shape and dtype.

    The graph reads fixed input tensors and writes fixed outputs: each call copies its inputs in,
    replays, and returns the fixed outputs, which the next call overwrites (on the same stream, so
    after every copy queued from them before it).  Called inside ``torch.inference_mode()``, as
    ``HFClap`` does (the fixed tensors are inference tensors).  Unfused checkpoints only: a fused
    one selects its longer clips with data-dependent indexing, which a capture refuses."""

    def __init__(self, model: Any) -> None:
        self._forward = model.get_audio_features
        self._graphs: dict[tuple, tuple[Any, Any, Any, Any]] = {}

    def __call__(self, input_features: Any, is_longer: Any) -> Any:
        import torch

        key = (tuple(input_features.shape), input_features.dtype, input_features.device)
        if key not in self._graphs:
            self._graphs[key] = self._capture(input_features, is_longer, torch)
        graph, features, longer, output = self._graphs[key]
        features.copy_(input_features)
        longer.copy_(is_longer)
        graph.replay()
        return output

    def _capture(self, input_features: Any, is_longer: Any, torch: Any) -> tuple[Any, Any, Any, Any]:
        features, longer = input_features.clone(), is_longer.clone()
        with torch.cuda.device(input_features.device):  # capture makes its stream on the current device
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
                for _ in range(2):
                    self._forward(input_features=features, is_longer=longer)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                output = self._forward(input_features=features, is_longer=longer)
        return graph, features, longer, output


@contextmanager
def graphed_clap() -> Iterator[None]:
    """Every ``HFClap`` loaded inside replays its audio model from CUDA graphs."""
    load = HFClap._load

    def graphed_load(self: HFClap, path: Any) -> None:
        load(self, path)
        if str(self.device).startswith("cuda"):
            self._model.get_audio_features = GraphedAudioFeatures(self._model)

    HFClap._load = graphed_load
    try:
        yield
    finally:
        HFClap._load = load
