"""Directed weighted graph with common traversal and shortest-path algorithms."""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from typing import Dict, Generic, Hashable, Iterator, List, Optional, Set, Tuple, TypeVar

N = TypeVar("N", bound=Hashable)


class CycleError(ValueError):
    """Raised when a topological sort is requested on a cyclic graph."""


class Graph(Generic[N]):
    def __init__(self, directed: bool = True) -> None:
        self.directed = directed
        self._adj: Dict[N, Dict[N, float]] = defaultdict(dict)

    def add_node(self, node: N) -> None:
        self._adj.setdefault(node, {})

    def add_edge(self, src: N, dst: N, weight: float = 1.0) -> None:
        if weight < 0:
            raise ValueError("negative weights are not supported")
        self._adj[src][dst] = weight
        self.add_node(dst)
        if not self.directed:
            self._adj[dst][src] = weight

    def remove_edge(self, src: N, dst: N) -> None:
        self._adj[src].pop(dst, None)
        if not self.directed:
            self._adj[dst].pop(src, None)

    def nodes(self) -> List[N]:
        return list(self._adj)

    def neighbors(self, node: N) -> Iterator[Tuple[N, float]]:
        return iter(self._adj.get(node, {}).items())

    def __contains__(self, node: object) -> bool:
        return node in self._adj

    def __len__(self) -> int:
        return len(self._adj)

    def bfs(self, start: N) -> List[N]:
        """Return nodes reachable from ``start`` in breadth-first order."""
        if start not in self._adj:
            raise KeyError(start)
        seen: Set[N] = {start}
        order: List[N] = []
        queue = deque([start])
        while queue:
            node = queue.popleft()
            order.append(node)
            for nxt, _ in self.neighbors(node):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return order

    def dfs(self, start: N) -> List[N]:
        """Return nodes reachable from ``start`` in depth-first preorder."""
        if start not in self._adj:
            raise KeyError(start)
        seen: Set[N] = set()
        order: List[N] = []
        stack = [start]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            order.append(node)
            children = [n for n, _ in self.neighbors(node) if n not in seen]
            stack.extend(reversed(children))
        return order

    def shortest_path(self, src: N, dst: N) -> Tuple[float, List[N]]:
        """Dijkstra's algorithm. Returns (distance, path) or (inf, []) if unreachable."""
        dist: Dict[N, float] = {src: 0.0}
        prev: Dict[N, N] = {}
        heap: List[Tuple[float, int, N]] = [(0.0, 0, src)]
        counter = 1
        visited: Set[N] = set()
        while heap:
            d, _, node = heapq.heappop(heap)
            if node in visited:
                continue
            visited.add(node)
            if node == dst:
                break
            for nxt, weight in self.neighbors(node):
                candidate = d + weight
                if candidate < dist.get(nxt, float("inf")):
                    dist[nxt] = candidate
                    prev[nxt] = node
                    heapq.heappush(heap, (candidate, counter, nxt))
                    counter += 1
        if dst not in dist:
            return float("inf"), []
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        path.reverse()
        return dist[dst], path

    def topological_sort(self) -> List[N]:
        """Kahn's algorithm; raises CycleError if the graph has a cycle."""
        if not self.directed:
            raise ValueError("topological sort requires a directed graph")
        indegree: Dict[N, int] = {node: 0 for node in self._adj}
        for node in self._adj:
            for nxt in self._adj[node]:
                indegree[nxt] += 1
        ready = deque(node for node, deg in indegree.items() if deg == 0)
        result: List[N] = []
        while ready:
            node = ready.popleft()
            result.append(node)
            for nxt in self._adj[node]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
        if len(result) != len(self._adj):
            raise CycleError("graph contains at least one cycle")
        return result

    def has_path(self, src: N, dst: N) -> bool:
        return src in self._adj and dst in self.bfs(src)

    def connected_components(self) -> List[Set[N]]:
        """Weakly connected components (edge direction ignored)."""
        undirected: Dict[N, Set[N]] = defaultdict(set)
        for node, edges in self._adj.items():
            undirected.setdefault(node, set())
            for nxt in edges:
                undirected[node].add(nxt)
                undirected[nxt].add(node)
        seen: Set[N] = set()
        components: List[Set[N]] = []
        for node in undirected:
            if node in seen:
                continue
            component: Set[N] = set()
            queue = deque([node])
            while queue:
                current = queue.popleft()
                if current in component:
                    continue
                component.add(current)
                queue.extend(undirected[current] - component)
            seen |= component
            components.append(component)
        return components


def from_edges(edges: List[Tuple[N, N, float]], directed: bool = True) -> Graph[N]:
    graph: Graph[N] = Graph(directed=directed)
    for src, dst, weight in edges:
        graph.add_edge(src, dst, weight)
    return graph


if __name__ == "__main__":
    g = from_edges([("a", "b", 4), ("a", "c", 1), ("c", "b", 2), ("b", "d", 5)])
    print("bfs:", g.bfs("a"))
    print("dfs:", g.dfs("a"))
    print("shortest a->d:", g.shortest_path("a", "d"))
    print("topo:", g.topological_sort())
    print("components:", g.connected_components())
