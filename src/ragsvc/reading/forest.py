"""Gradient-boosted trees evaluated with numpy: the trained reader's models, as `make train-reader` writes them
(LightGBM's trees, flattened into arrays; LightGBM itself is a training-only dependency and is never imported here).

A node is a split (`feature` >= 0: go left when the row's value is <= `threshold`) or a leaf (`feature` == -1,
`value` is its output). A forest's output for a row is the sum of its trees' leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class Forest:
    feature: IntArray
    threshold: FloatArray
    left: IntArray
    right: IntArray
    value: FloatArray
    roots: IntArray  # the root node of each tree
    depth: int  # the longest path from a root to a leaf
    # What `predict` walks, derived from the above: each node's feature (a leaf's 0) and its two children (a leaf's
    # itself), right then left, in platform integers (numpy indexes with them without converting).
    _feature: npt.NDArray[np.intp] = field(init=False, repr=False, compare=False)
    _children: npt.NDArray[np.intp] = field(init=False, repr=False, compare=False)
    _right: npt.NDArray[np.intp] = field(init=False, repr=False, compare=False)
    _left: npt.NDArray[np.intp] = field(init=False, repr=False, compare=False)
    _roots: npt.NDArray[np.intp] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        leaf = self.feature < 0
        itself = np.arange(self.feature.size)
        right, left = np.where(leaf, itself, self.right), np.where(leaf, itself, self.left)
        object.__setattr__(self, "_feature", np.where(leaf, 0, self.feature).astype(np.intp))
        object.__setattr__(self, "_children", np.stack([right, left], axis=1).ravel().astype(np.intp))
        object.__setattr__(self, "_right", right.astype(np.intp))
        object.__setattr__(self, "_left", left.astype(np.intp))
        object.__setattr__(self, "_roots", self.roots.astype(np.intp))

    def predict(self, rows: FloatArray) -> FloatArray:
        """The forest's output for each row of `rows` (n x features). Every row walks every tree a level at a
        time, `depth` levels (a leaf stays where it is): going left when the row's value is <= the threshold."""
        if rows.shape[0] == 0 or self.roots.size == 0:
            return np.zeros(rows.shape[0])
        if rows.shape[0] == 1:
            return self._predict_one(np.asarray(rows, dtype=np.float64)[0])
        node = np.broadcast_to(self._roots, (rows.shape[0], self.roots.size)).copy()
        values = np.ascontiguousarray(rows, dtype=np.float64).ravel()
        row_start = (np.arange(rows.shape[0]) * rows.shape[1])[:, None]
        for _ in range(self.depth):
            node = self._children[2 * node + (values[row_start + self._feature[node]] <= self.threshold[node])]
        return np.asarray(self.value[node].sum(axis=1), dtype=np.float64)

    def _predict_one(self, row: FloatArray) -> FloatArray:
        """`predict` of one row, the same leaves: every node's way for the row is decided at once (its next
        node), then each tree is walked by that table alone, `depth` gathers instead of `depth` rounds of eight
        (three predictions of a question are of one row: 105 -> 30 us each on the shipped sentence model)."""
        way = np.where(row[self._feature] <= self.threshold, self._left, self._right)
        node = self._roots
        for _ in range(self.depth):
            node = way[node]
        return np.asarray(self.value[node[None, :]].sum(axis=1), dtype=np.float64)

    def arrays(self, prefix: str) -> dict[str, npt.NDArray[Any]]:
        """The forest as named arrays (for an .npz file)."""
        return {
            f"{prefix}.feature": self.feature,
            f"{prefix}.threshold": self.threshold,
            f"{prefix}.left": self.left,
            f"{prefix}.right": self.right,
            f"{prefix}.value": self.value,
            f"{prefix}.roots": self.roots,
            f"{prefix}.depth": np.asarray([self.depth], dtype=np.int32),
        }

    @classmethod
    def from_arrays(cls, arrays: Any, prefix: str) -> Forest:
        return cls(
            feature=np.asarray(arrays[f"{prefix}.feature"], dtype=np.int32),
            threshold=np.asarray(arrays[f"{prefix}.threshold"], dtype=np.float64),
            left=np.asarray(arrays[f"{prefix}.left"], dtype=np.int32),
            right=np.asarray(arrays[f"{prefix}.right"], dtype=np.int32),
            value=np.asarray(arrays[f"{prefix}.value"], dtype=np.float64),
            roots=np.asarray(arrays[f"{prefix}.roots"], dtype=np.int32),
            depth=int(arrays[f"{prefix}.depth"][0]),
        )

    @classmethod
    def from_lightgbm(cls, dump: dict[str, Any]) -> Forest:
        """A forest from LightGBM's `Booster.dump_model()` (numerical splits with "<=" only)."""
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        value: list[float] = []
        roots: list[int] = []
        depth = 0

        def add(node: dict[str, Any], level: int) -> int:
            nonlocal depth
            index = len(feature)
            feature.append(-1)
            threshold.append(0.0)
            left.append(index)
            right.append(index)
            value.append(0.0)
            if "leaf_value" in node:
                value[index] = float(node["leaf_value"])
                depth = max(depth, level)
                return index
            if node.get("decision_type", "<=") != "<=":
                raise ValueError(f"unsupported split {node.get('decision_type')!r}")
            feature[index] = int(node["split_feature"])
            threshold[index] = float(node["threshold"])
            left[index] = add(node["left_child"], level + 1)
            right[index] = add(node["right_child"], level + 1)
            return index

        for tree in dump["tree_info"]:
            roots.append(add(tree["tree_structure"], 0))
        return cls(
            feature=np.asarray(feature, dtype=np.int32),
            threshold=np.asarray(threshold, dtype=np.float64),
            left=np.asarray(left, dtype=np.int32),
            right=np.asarray(right, dtype=np.int32),
            value=np.asarray(value, dtype=np.float64),
            roots=np.asarray(roots, dtype=np.int32),
            depth=depth,
        )
