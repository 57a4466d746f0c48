"""The package's shape: no import cycle (annotation imports included), imports point down,
no two packages importing each other, no class too big to read.

Every ``import`` statement counts, wherever it stands: module top, function
body, ``if TYPE_CHECKING``. The layers are drawn in doc/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "acp_nvim"

# A module may import its own layer and the layers below it, never one above.
LAYERS = [
    ("protocol", ["acp_nvim.protocol"]),
    ("review", ["acp_nvim.review"]),
    (
        "client basics",
        [
            "acp_nvim.client.config",
            "acp_nvim.client.presets",
            "acp_nvim.client.editor",
            "acp_nvim.client.errors",
            "acp_nvim.client.json_file",
            "acp_nvim.client.log",
            "acp_nvim.client.malloc",
            "acp_nvim.client.tasks",
            "acp_nvim.client.text",
        ],
    ),
    ("session", ["acp_nvim.client.session"]),
    ("services", ["acp_nvim.client.services"]),
    # The chat history: on the session model, used by the app and the host.
    ("history", ["acp_nvim.client.history"]),
    # The editor MCP server: on the services, offered by the agent adapters and the app.
    ("mcp", ["acp_nvim.client.mcp"]),
    ("agent", ["acp_nvim.client.agent"]),
    ("app", ["acp_nvim.client.app"]),
    ("nvim", ["acp_nvim.nvim", "acp_nvim.health", "acp_nvim.__main__"]),
]
# Programs of their own: they use the protocol layer only (the MCP shim, not even that).
STANDALONE = {"acp_nvim.demo_agent": "protocol", "acp_nvim.mcp": "protocol"}
# Importable from anywhere: the version string.
ANYWHERE = {"acp_nvim"}
# Wire types are translated in the protocol adapters and nowhere else above them.
WIRE = ("acp_nvim.protocol.schema_v1", "acp_nvim.protocol.schema_v2")
WIRE_ALLOWED = ("acp_nvim.client.agent.", "acp_nvim.demo_agent", "acp_nvim.protocol")
# Lines a hand-written class may span; one that grows past it has two concerns.
CLASS_LINES = 450


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, name: str) -> set[str]:
    """The acp_nvim modules ``path`` imports (``from a import b`` counts ``a.b`` when
    that is a module, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return {m for m in found if m == "acp_nvim" or m.startswith("acp_nvim.")}


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: imports(path, name) for name, path in MODULES.items()}


def layer_of(module: str) -> int:
    for standalone, below in STANDALONE.items():
        if module == standalone or module.startswith(standalone + "."):
            return next(i for i, (layer, _) in enumerate(LAYERS) if layer == below)
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        if module not in ANYWHERE:
            layer_of(module)


def test_imports_only_point_down() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in GRAPH.items()
        if module not in ANYWHERE
        for target in targets
        if target not in ANYWHERE and layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_no_import_cycle() -> None:
    cycles: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH.get(module, ())):
            if target not in MODULES or target == module:
                continue
            if state.get(target) == "open":
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def packages_importing_each_other(graph: dict[str, set[str]]) -> list[str]:
    """Pairs of packages (folders, their subpackages included) where each imports
    the other, with one import of each direction: a cycle between modules may be
    absent while the packages still lean on each other."""
    packages = {m.rsplit(".", 1)[0] for m in MODULES if "." in m} | {
        m for m, path in MODULES.items() if path.name == "__init__.py"
    }

    def holding(module: str) -> list[str]:
        return [p for p in packages if module == p or module.startswith(p + ".")]

    # (importer package, imported package) -> one import that makes it so
    leaning: dict[tuple[str, str], str] = {}
    for module, targets in graph.items():
        for target in targets:
            for source_package in holding(module):
                for target_package in holding(target):
                    # Neither holds the other's module: two packages side by side.
                    if not within(target, source_package) and not within(module, target_package):
                        leaning.setdefault(
                            (source_package, target_package), f"{module} imports {target}"
                        )
    return sorted(
        f"{a} <-> {b}: {leaning[a, b]}; {leaning[b, a]}"
        for a, b in leaning
        if a < b and (b, a) in leaning
    )


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_two_packages_import_each_other() -> None:
    assert packages_importing_each_other(GRAPH) == []


def test_packages_importing_each_other_are_found() -> None:
    planted = {m: set(targets) for m, targets in GRAPH.items()}
    # services already import the session model; one import back ties the two.
    planted["acp_nvim.client.session.chat"].add("acp_nvim.client.services.errors")
    (found,) = packages_importing_each_other(planted)
    assert found.startswith("acp_nvim.client.services <-> acp_nvim.client.session: ")
    assert "acp_nvim.client.session.chat imports acp_nvim.client.services.errors" in found


def test_wire_types_stay_in_the_adapters() -> None:
    leaks = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if target in WIRE and not module.startswith(WIRE_ALLOWED)
    ]
    assert leaks == []


def big_classes(source: str, limit: int = CLASS_LINES) -> list[str]:
    """The classes in ``source`` longer than ``limit`` lines; none in a generated
    module (its first line says so)."""
    if source.lstrip('"# ').startswith("Generated"):
        return []
    return [
        f"{node.name} has {size} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
        and (size := (node.end_lineno or node.lineno) - node.lineno + 1) > limit
    ]


def test_no_class_is_too_big_to_read() -> None:
    big = [
        f"{path.relative_to(ROOT)}: {found}"
        for path in MODULES.values()
        for found in big_classes(path.read_text())
    ]
    assert big == []


def test_a_big_class_is_found_and_generated_modules_are_not_counted() -> None:
    source = "class Big:\n" + "    x = 1\n" * CLASS_LINES
    assert big_classes(source) == [f"Big has {CLASS_LINES + 1} lines"]
    assert big_classes("# Generated by scripts/gen_types.py: do not edit.\n" + source) == []
    assert big_classes((PACKAGE / "protocol" / "schema_v2.py").read_text(), limit=1) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from acp_nvim.client.session.chat import Chat", {"acp_nvim.client.session.chat"}),
        ("if TYPE_CHECKING:\n    from acp_nvim.client import app", {"acp_nvim.client.app"}),
        ("def f():\n    import acp_nvim.review", {"acp_nvim.review"}),
    ],
)
def test_every_kind_of_import_is_seen(tmp_path: Path, source: str, expected: set[str]) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert imports(probe, "acp_nvim.client.session.probe") == expected


# Foreign exceptions are translated where they enter, into ours: the wire's (msgspec,
# anyio streams) in protocol/, the user's options (validated with msgspec, decision
# 0010) in client/config.py, the history's stored JSON in client/history. Nothing
# else catches or suppresses them (decision 0035).
FOREIGN = ("msgspec", "anyio")
FOREIGN_ALLOWED = {
    "acp_nvim.protocol": FOREIGN,
    "acp_nvim.client.config": ("msgspec",),
    "acp_nvim.client.history": ("msgspec",),
}


def caught_foreign(path: Path) -> set[str]:
    """The msgspec and anyio exceptions ``path`` names in an ``except`` clause or a
    ``suppress(...)``, as ``package.Name``."""
    tree = ast.parse(path.read_text(), str(path))
    imported = {  # from msgspec import ValidationError: the bare name is foreign too
        alias.asname or alias.name: f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in FOREIGN
        for alias in node.names
    }
    named: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            named.extend(node.type.elts if isinstance(node.type, ast.Tuple) else [node.type])
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("suppress"):
            named.extend(node.args)
    found = set()
    for expr in named:
        if isinstance(expr, ast.Starred):
            expr = expr.value
        name = imported.get(ast.unparse(expr), ast.unparse(expr))
        if name.split(".")[0] in FOREIGN:
            found.add(name)
    return found


def test_foreign_errors_are_caught_only_where_they_enter() -> None:
    caught = {
        f"{module} catches {name}"
        for module, path in MODULES.items()
        for name in caught_foreign(path)
        if not any(
            (module == where or module.startswith(where + ".")) and name.split(".")[0] in what
            for where, what in FOREIGN_ALLOWED.items()
        )
    }
    assert sorted(caught) == []


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    pass\nexcept msgspec.DecodeError:\n    pass",
        "try:\n    pass\nexcept (KeyError, anyio.BrokenResourceError):\n    pass",
        "from msgspec import ValidationError\ntry:\n    pass\nexcept ValidationError:\n    pass",
        "with contextlib.suppress(anyio.ClosedResourceError):\n    pass",
    ],
)
def test_every_kind_of_catch_is_seen(tmp_path: Path, source: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert caught_foreign(probe)


# What the host must not import before it spawns the first agent: a chat's model,
# view, record and the review load with the first chat, while the agent starts
# (doc/performance.md, start-up). A top-level import of one of them from a module the
# host imports undoes that overlap without any test failing otherwise.
AFTER_THE_SPAWN = (
    "acp_nvim.client.session.chat",
    "acp_nvim.client.session.model",
    "acp_nvim.client.session.view",
    "acp_nvim.client.history._record",
    "acp_nvim.review",
    "acp_nvim.client.agent.connection",
    "acp_nvim.protocol.schema_v1",
    "acp_nvim.client.mcp",
)


def test_the_host_imports_a_chat_only_after_the_first_spawn() -> None:
    import subprocess
    import sys

    code = "import sys, acp_nvim.nvim.host; print(*(m for m in sys.argv[1:] if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code, *AFTER_THE_SPAWN],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    ).stdout.split()
    assert loaded == []
