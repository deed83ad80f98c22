"""A numpy forward pass of a node-set actor, for agents in evaluation.

A torch call on one observation costs a few hundred microseconds of framework
overhead for a network of a few 64-unit layers. :class:`NumpyNodeSetActor`
reads the actor's weights once, as float32 arrays, and computes the same
logits with numpy in the same order of operations (concatenate, then a matrix
product per layer), so that its greedy actions are the torch path's:
``tests/agents/test_inference.py`` checks them against each other on
observations from real env steps. The torch path (``AgentPolicy.act_torch``)
stays the reference, and the only path for sampled actions, DQN and SB3's flat
MLP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from agents.networks import NodeActionHead, NodeSetNetwork


def _layer(module: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """A torch Linear as (weight transposed, bias), float32 numpy arrays."""
    assert isinstance(module, nn.Linear)
    weight = module.weight.detach().cpu().numpy().astype(np.float32)
    bias = module.bias.detach().cpu().numpy().astype(np.float32)
    return np.ascontiguousarray(weight.T), bias


class NumpyNodeSetActor:
    """The logits of a node-set actor-critic policy's actor (``policy``: an SB3
    policy whose ``mlp_extractor`` is a :class:`NodeSetNetwork`), for one
    observation (a 1-D array) or a batch, as the live cluster lays them out."""

    def __init__(self, policy: Any) -> None:
        body = policy.mlp_extractor
        if not isinstance(body, NodeSetNetwork):
            raise TypeError(f"a numpy actor needs a NodeSetNetwork body, not {type(body).__name__}")
        self.node_features = body.node_features
        self.global_features = body.global_features
        self.hidden = body.hidden
        self.per_node_actor = body.per_node_actor
        self.node_1 = _layer(body.node_net[0])
        self.node_2 = _layer(body.node_net[2])
        self.context = _layer(body.context_net[0])
        self.score = _layer(body.score_net[0])
        head = policy.action_net
        self.kind = head.kind if isinstance(head, NodeActionHead) else "context"
        if isinstance(head, NodeActionHead):
            self.node_logits = _layer(head.node_logits)
            self.no_evict = _layer(head.no_evict)
            self.speculate = _layer(head.speculate_logits) if head.speculate else None
            self.cache = (  # RouteWarm-v0's cache_actions: per node, and "nothing" of each part
                (_layer(head.cache_logits), _layer(head.cache_none)) if head.cache_actions else None
            )
        else:  # the threshold controller: SB3's Linear on the context
            self.context_logits = _layer(head)

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """The logits of one observation (a 1-D array)."""
        return self._forward(np.asarray(obs, dtype=np.float32))

    def batch_logits(self, obs: np.ndarray) -> np.ndarray:
        """The logits of a batch of observations (the rows of a 2-D array), one numpy
        call a layer for the whole batch. Each row's are the very floats of
        :meth:`logits` (every product multiplies one (1, features) row: a node's, or
        an observation's context), so greedy actions never depend on the batch."""
        return self._forward(np.asarray(obs, dtype=np.float32))

    def _forward(self, x: np.ndarray) -> np.ndarray:
        """The logits of ``x``, an observation or a batch of them (leading axes)."""
        lead = x.shape[:-1]
        n = (x.shape[-1] - self.global_features) // self.node_features
        split = n * self.node_features
        nodes = x[..., :split].reshape(*lead, n, self.node_features)
        w, b = self.node_1
        embedded = relu(_rowwise(nodes, w) + b)
        w, b = self.node_2
        embedded = relu(_rowwise(embedded, w) + b)
        hidden = self.hidden
        pooled = np.empty((*lead, 2 * hidden + x.shape[-1] - split), dtype=np.float32)
        np.divide(np.add.reduce(embedded, axis=-2), n, out=pooled[..., :hidden])  # as np.mean
        np.maximum.reduce(embedded, axis=-2, out=pooled[..., hidden : 2 * hidden])
        pooled[..., 2 * hidden :] = x[..., split:]
        w, b = self.context
        context = relu(_rowwise(pooled, w) + b)
        if self.kind == "context":
            w, b = self.context_logits
            return _rowwise(context, w) + b
        paired = np.empty((*lead, n, 2 * hidden), dtype=np.float32)
        paired[..., :hidden] = embedded
        paired[..., hidden:] = context[..., None, :]
        w, b = self.score
        scores = relu(_rowwise(paired, w) + b)
        w, b = self.node_logits
        out = _rowwise(scores, w) + b
        if self.kind == "route":
            return out[..., 0]
        w, b = self.no_evict
        no_evict = _rowwise(context, w) + b
        parts = [out[..., 0], out[..., 1:3].reshape(*lead, -1), no_evict, out[..., 3]]
        if self.speculate is not None:
            w, b = self.speculate
            parts.append((_rowwise(scores, w) + b).reshape(*lead, -1))
        if self.cache is not None:
            (w, b), (w_none, b_none) = self.cache
            cache = _rowwise(scores, w) + b
            none = _rowwise(context, w_none) + b_none
            parts += [none[..., :1], cache[..., 0], cache[..., 1]]  # nothing, pin, unpin
            parts += [none[..., 1:], cache[..., 2], cache[..., 3]]  # nothing, demote, promote
        return np.concatenate(parts, axis=-1)


def _rowwise(rows: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``rows @ weight`` for a vector or a stack of them, each row multiplied alone
    (as a (1, features) matrix). A (rows, features) product lets the BLAS sum some
    rows in another order than others (OpenBLAS on an AMD EPYC: rows 5-7 of a
    matrix round differently from rows 1-4), so two nodes in the same state could
    get different logits, and the greedy route would break their tie otherwise
    than the torch path does; and a batch would round differently from one
    observation."""
    if rows.ndim == 1:
        return rows @ weight
    return (rows[..., None, :] @ weight)[..., 0, :]


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0), in place."""
    return np.maximum(x, 0.0, out=x)
