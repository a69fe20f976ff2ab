"""The fast path for IR files as serializers write them: each distinct layer form parsed once
by libxml2, the other layers filled in; it gives exactly what the general reader
(irrun/ir_reader.py) gives, or steps aside.

IRs written by a serializer repeat a handful of layer forms thousands of times:
the same tags, attribute names, dims and white space; only attribute values
differ.  The fast path cuts the first <layers> and <edges> sections into one
chunk per layer (edge), splits each chunk at its quotes into markup and
attribute values, and reads the markup once per distinct form: libxml2 parses
it, values replaced by placeholders, and a `_LayerPlan` records where each
value goes.  Every other chunk of that form only fills the plan in.  The rest
of the document (the <net> element, its rt_info) is parsed by libxml2 as before,
with the two sections' contents cut out.

Why that is exact: libxml2 reads every distinct markup and the rest of the file,
with the same options; the values are checked to hold nothing libxml2 would
refuse or change (no "<", "&", tab, newline or control character, none too
long); and lines are counted in the markup.  Anything else (entity references,
comments, namespaces, CR line ends, white space that libxml2's lines past 65535
depend on, sub-graphs, and every defect that needs a diagnostic) sends the
whole file down the general path, so results never depend on the path.
"""
from __future__ import annotations

import itertools
import re
from typing import NamedTuple

from lxml import etree

from . import etypes
from .ir import EMPTY, Edge, Layer, Port, RtElement, RtInfo, split_names
from .ir_reader import LAST_EXACT_LINE, PLAIN_LAYER_PARTS, ElementReader, children_by_tag, safe_parser
from .spec import VersionLookupError, resolve_version


_PH_OPEN, _PH_CLOSE = "\ue000", "\ue001"
_PROLOGUE = re.compile(r'\ufeff?(?:<\?xml(?P<decl>[^<>]*)\?>)?[ \t\n]*<net(?:[^<>"]|"[^"<]*")*>[ \t\n]*<layers>')
_ENCODING = re.compile(r'encoding[ \t\n]*=[ \t\n]*["\']([^"\']*)["\']')
_BETWEEN_SECTIONS = re.compile(r'[ \t\n]*<edges>')
_FAST_LINE_LIMIT = LAST_EXACT_LINE
# libxml2 refuses a token (an attribute value, a text) of about 10^7 characters unless
# XML_PARSE_HUGE is on; chunks are read without libxml2 seeing their values, so longer ones
# take the general path, which reports them as it always did.
_LONGEST_CHUNK = 9_000_000
# Reading a new form costs about what the general path spends on a layer: an IR whose
# layers are mostly of forms of their own (every shape different) is read by the general
# path once that shows (with more than `_FEW_FORMS` forms, one per `_FORMS_PER_LAYER` layers).
_FEW_FORMS = 500
_FORMS_PER_LAYER = 5


class _NotPlain(Exception):
    """The file is not in the form the fast path reads exactly: take the general path."""


class _PortPlan(NamedTuple):
    id: int                          # index of the value
    precision: int | None
    names: int | None
    dims: tuple[int, ...]
    line: int                        # lines below the chunk's first line
    rt_info: tuple | None


class _LayerPlan(NamedTuple):
    newlines: int                    # in the markup (values hold none)
    id: int
    name: int | None
    type: int
    version: int
    output_names: int | None
    line: int
    data: tuple[tuple[str, int], ...] | None
    data_line: int
    inputs: tuple[_PortPlan, ...]
    outputs: tuple[_PortPlan, ...]
    rt_info: tuple | None


class _EdgePlan(NamedTuple):
    newlines: int
    ends: tuple[int, int, int, int]  # from-layer, from-port, to-layer, to-port
    line: int


def _template(parts: list[str]) -> str:
    """Markup with each attribute value replaced by a placeholder naming its index."""
    if len(parts) % 2 == 0:
        raise _NotPlain("unbalanced quotes")
    return '"'.join(part if i % 2 == 0 else f"{_PH_OPEN}{i // 2}{_PH_CLOSE}" for i, part in enumerate(parts))


class _PlanBuilder:
    """Reads one template fragment: which value index each attribute holds."""

    def __init__(self, fragment: str, n_values: int, big_file: bool):
        # (The parser drops comments and processing instructions, which would move lines.)
        if "<!" in fragment or "<?" in fragment:
            raise _NotPlain("a comment, CDATA or a processing instruction")
        self.fragment = fragment
        try:
            self.root = etree.fromstring(fragment, safe_parser())
        except (etree.XMLSyntaxError, ValueError):
            raise _NotPlain("markup libxml2 does not accept") from None
        self.big_file = big_file
        self.used: set[int] = set()
        for element in self.root.iter():
            for value in element.attrib.values():
                self.used.add(self._index(value))
        if self.used != set(range(n_values)):
            raise _NotPlain("a quote outside an attribute value")

    @staticmethod
    def _index(value: str) -> int:
        if value[:1] != _PH_OPEN or value[-1:] != _PH_CLOSE or not value[1:-1].isdigit():
            raise _NotPlain("an attribute value that is not one placeholder")
        return int(value[1:-1])

    def slot(self, element, name: str, required: bool = False) -> int | None:
        value = element.get(name)
        if value is None:
            if required:
                raise _NotPlain(f"no {name} attribute")
            return None
        return self._index(value)

    def line(self, element) -> int:
        """Lines below the fragment's first, where `line_of` gives the same in a file of any length."""
        # (The fragment's root has a tail in the file when white space ends the fragment.)
        tail = element.tail is not None or (element is self.root and self.fragment[-1:] != ">")
        if self.big_file and element.text is None and not (len(element) == 0 and tail):
            raise _NotPlain("an element whose line libxml2 does not keep exactly")
        return element.sourceline - 1

    def rt_info(self, element) -> tuple:
        """`read_rt_info` of the element, with value indices for attribute values."""
        return tuple((child.tag, tuple((k, self._index(v)) for k, v in child.attrib.items()),
                      self.rt_info(child) if len(child) else ())
                     for child in element)

    def port(self, element, is_output: bool) -> _PortPlan:
        dims, rt = [], None
        for child in element:
            if child.tag == "dim":
                if len(child):
                    raise _NotPlain("a <dim> with elements inside")
                text = (child.text or "").strip()
                try:
                    value = int(text)
                except ValueError:
                    raise _NotPlain("an invalid dim") from None
                if value < -1:
                    raise _NotPlain("an invalid dim")
                dims.append(value)
            elif child.tag == "rt_info":
                if rt is None:
                    rt = self.rt_info(child)
            else:
                raise _NotPlain(f"<{child.tag}> in a port")
        precision = self.slot(element, "precision", required=is_output)
        return _PortPlan(self.slot(element, "id", required=True), precision, self.slot(element, "names"),
                         tuple(dims), self.line(element), rt)

    def ports(self, container, is_output: bool) -> tuple[_PortPlan, ...]:
        ports = []
        for element in container:
            if element.tag != "port":
                raise _NotPlain(f"<{element.tag}> among ports")
            ports.append(self.port(element, is_output))
        return tuple(ports)

    def layer(self, template: str) -> _LayerPlan:
        root = self.root
        kids = children_by_tag(root)
        if not kids.keys() <= PLAIN_LAYER_PARTS or any(len(v) > 1 for k, v in kids.items() if k != "data"):
            raise _NotPlain("a sub-graph or repeated layer parts")
        data = kids.get("data")
        inputs, outputs, rt = kids.get("input"), kids.get("output"), kids.get("rt_info")
        return _LayerPlan(
            template.count("\n"),
            self.slot(root, "id", required=True), self.slot(root, "name"), self.slot(root, "type", required=True),
            self.slot(root, "version", required=True), self.slot(root, "output_names"), self.line(root),
            tuple((k, self._index(v)) for k, v in data[0].items()) if data else None,
            self.line(data[0]) if data else 0,
            self.ports(inputs[0], False) if inputs else (), self.ports(outputs[0], True) if outputs else (),
            self.rt_info(rt[0]) if rt else None)

    def edge(self, template: str) -> _EdgePlan:
        root = self.root
        if len(root):
            raise _NotPlain("an edge with elements inside")
        ends = tuple(self.slot(root, name, required=True)
                     for name in ("from-layer", "from-port", "to-layer", "to-port"))
        return _EdgePlan(template.count("\n"), ends, self.line(root))


def _check_values(parts: list[str]) -> None:
    """The values (odd parts) hold no "<" (not well-formed XML), no tab or newline (libxml2 turns
    those into spaces, and lines are counted in the markup), no other unusual character, and
    none is longer than libxml2 reads."""
    values = "".join(parts[1::2])
    if "<" in values or not values.isprintable():
        raise _NotPlain("a value with <, a tab, a newline or an unusual character")
    if len(values) > _LONGEST_CHUNK and max(map(len, parts[1::2])) > _LONGEST_CHUNK:
        raise _NotPlain("a value longer than libxml2 reads without XML_PARSE_HUGE")


def _fill_rt_info(plan: tuple, values: list[str]) -> RtInfo:
    return tuple(RtElement(tag, tuple((k, values[i]) for k, i in attrs), _fill_rt_info(children, values))
                 for tag, attrs, children in plan)


# A form read this often gets a builder of its own (generated Python, no loops);
# rarer forms are built by `_build_layer`.
_COMPILE_AFTER = 8


def _build_layer(plan: _LayerPlan, values: list, line: int, lid: str, resolved: tuple[str, int]) -> Layer:
    """The layer `plan` describes, from one chunk's values (with the two absent values appended)."""
    port_lists = []
    for port_plans in (plan.inputs, plan.outputs):
        ports = []
        for index, p in enumerate(port_plans):
            precision = values[_slot(p.precision)]
            etype = etypes.BY_PRECISION.get(precision)
            if etype is None and precision is not None:
                raise _NotPlain("an unknown precision")
            names = values[_slot(p.names)]
            ports.append(Port(values[p.id], index, line + p.line, precision, etype, p.dims,
                              split_names(names) if names else (),
                              () if p.rt_info is None else _fill_rt_info(p.rt_info, values)))
        if len(ports) > 1 and len({p.id for p in ports}) < len(ports):
            raise _NotPlain("a duplicate port id")
        port_lists.append(ports)
    output_names = values[_slot(plan.output_names)]
    return Layer(lid, values[_slot(plan.name, _ABSENT_EMPTY)], values[plan.type], values[plan.version],
                 line + plan.line, {} if plan.data is None else {k: values[i] for k, i in plan.data},
                 None if plan.data is None else line + plan.data_line, port_lists[0], port_lists[1],
                 () if plan.rt_info is None else _fill_rt_info(plan.rt_info, values),
                 None if output_names is None else split_names(output_names), resolved[0], resolved[1],
                 EMPTY, EMPTY, [], "")


def _compile_builder(plan: _LayerPlan):
    """`_build_layer` for this one plan, as straight-line code."""
    names = {"Port": Port, "Layer": Layer, "split_names": split_names, "fill": _fill_rt_info,
             "by_precision": etypes.BY_PRECISION, "_NotPlain": _NotPlain, "EMPTY": EMPTY}
    code = ["def build(values, line, lid, resolved):"]
    port_lists = []
    for side, port_plans in (("i", plan.inputs), ("o", plan.outputs)):
        ports = []
        for index, p in enumerate(port_plans):
            port = f"{side}{index}"
            names[f"dims_{port}"] = p.dims
            if p.precision is None:
                code.append(f"    precision_{port} = etype_{port} = None")
            else:
                code.append(f"    precision_{port} = values[{p.precision}]")
                code.append(f"    etype_{port} = by_precision.get(precision_{port})")
                code.append(f"    if etype_{port} is None:")
                code.append("        raise _NotPlain('an unknown precision')")
            tensor_names = "()"
            if p.names is not None:
                code.append(f"    names_{port} = values[{p.names}]")
                tensor_names = f"split_names(names_{port}) if names_{port} else ()"
            rt_info = "()"
            if p.rt_info is not None:
                names[f"rt_{port}"] = p.rt_info
                rt_info = f"fill(rt_{port}, values)"
            code.append(f"    {port} = Port(values[{p.id}], {index}, line + {p.line}, precision_{port}, "
                        f"etype_{port}, dims_{port}, {tensor_names}, {rt_info})")
            ports.append(port)
        if len(ports) > 1:
            code.append(f"    if len({{{', '.join(f'{p}.id' for p in ports)}}}) < {len(ports)}:")
            code.append("        raise _NotPlain('a duplicate port id')")
        port_lists.append(f"[{', '.join(ports)}]")
    data, data_line = "{}", "None"
    if plan.data is not None:
        data = "{" + ", ".join(f"{k!r}: values[{i}]" for k, i in plan.data) + "}"
        data_line = f"line + {plan.data_line}"
    rt_info = "()"
    if plan.rt_info is not None:
        names["rt_layer"] = plan.rt_info
        rt_info = "fill(rt_layer, values)"
    name = '""' if plan.name is None else f"values[{plan.name}]"
    output_names = "None" if plan.output_names is None else f"split_names(values[{plan.output_names}])"
    code.append(f"    return Layer(lid, {name}, values[{plan.type}], values[{plan.version}], line + {plan.line}, "
                f"{data}, {data_line}, {port_lists[0]}, {port_lists[1]}, {rt_info}, {output_names}, "
                f"resolved[0], resolved[1], EMPTY, EMPTY, [], '')")
    exec("\n".join(code), names)
    return names["build"]


class _LayerForm:
    """One form of layer: its plan, and how to build a layer of it."""

    __slots__ = ("plan", "markup", "newlines", "id_at", "type_at", "version_at", "build", "uses",
                 "next_markup", "next_form")

    def __init__(self, plan: _LayerPlan | None, markup: tuple[str, ...]):
        self.plan, self.markup = plan, markup
        if plan is not None:
            self.newlines = plan.newlines
            self.id_at, self.type_at, self.version_at = plan.id, plan.type, plan.version
        self.build = self._interpret
        self.uses = 0
        self.next_markup, self.next_form = None, None   # the form that followed this one last time

    def _interpret(self, values: list, line: int, lid: str, resolved: tuple[str, int]) -> Layer:
        self.uses += 1
        if self.uses >= _COMPILE_AFTER:
            self.build = _compile_builder(self.plan)
        return _build_layer(self.plan, values, line, lid, resolved)


# Value indices of absent attributes: `_FastReader` appends these two values to each chunk's values.
_ABSENT, _ABSENT_EMPTY = -2, -1


def _slot(index: int | None, absent: int = _ABSENT) -> int:
    return absent if index is None else index


class _FastReader:
    """The first <layers> and <edges> of a plain IR, read through per-form plans.

    The loops below run once per layer of a big IR: plans are flattened into
    tuples, and an absent attribute reads one of the two values appended to
    each chunk's values (None, or "" for a name).
    """

    def __init__(self, text: str, reader: ElementReader):
        self.text = text
        self.reader = reader
        # A file this short has no line past libxml2's exact ones; a longer one is read as if
        # every element were past them (stricter, and exact either way).
        self.big_file = len(text) > _FAST_LINE_LIMIT
        self.layer_forms: dict[tuple[str, ...], _LayerForm] = {}     # by markup
        self.edge_plans: dict[tuple[str, ...], tuple] = {}           # by markup: (newlines, ends, line)

    def _first(self, start: int, end: int, tag: str, start_line: int) -> tuple[int, int]:
        """Where the first `<tag ` is (or `end`), and its line; only white space may come before it."""
        # (A `<tag` without its space ends up inside a chunk, where its plan refuses it.)
        text, opening = self.text, f"<{tag} "
        at = text.find(opening, start, end)
        if at < 0:
            at = end
        if text[start:at].strip(" \t\n"):
            raise _NotPlain(f"something other than <{tag}> elements")
        return at, start_line + text.count("\n", start, at)

    def _plan_builder(self, tag: str, parts: list[str]) -> tuple[_PlanBuilder, str]:
        template = _template(parts)
        return _PlanBuilder(f"<{tag} " + template, len(parts) // 2, self.big_file), template

    def _layer_form(self, parts: list[str], markup: tuple[str, ...]) -> _LayerForm:
        builder, template = self._plan_builder("layer", parts)
        return _LayerForm(builder.layer(template), markup)

    def _edge_plan(self, parts: list[str]) -> tuple:
        builder, template = self._plan_builder("edge", parts)
        p = builder.edge(template)
        return p.newlines, p.ends, p.line

    def _chunks(self, at: int, end: int, tag: str):
        """Each `<tag ...>` of text[at:end] up to the next one, split at its quotes: markup at
        the even indices, attribute values at the odd ones."""
        text, opening = self.text, f"<{tag} "
        while at < end:
            following = text.find(opening, at + len(opening), end)
            if following < 0:
                following = end
            if following - at > _LONGEST_CHUNK:
                raise _NotPlain(f"a {tag} longer than libxml2 reads without XML_PARSE_HUGE")
            yield text[at + len(opening):following].split('"')
            at = following

    def layers(self, start: int, end: int) -> tuple[dict[str, Layer], int]:
        """The layers of text[start:end], and the line on which `end` is."""
        text, forms, add_layer = self.text, self.layer_forms, self.reader.add_layer
        versions: dict[tuple[str, str], tuple[str, int]] = {}
        layers: dict[str, Layer] = {}
        at, line = self._first(start, end, "layer", text.count("\n", 0, start) + 1)
        previous = _LayerForm(None, ())   # (a form no chunk has: where the first prediction comes from)
        for parts in self._chunks(at, end, "layer"):
            markup = tuple(parts[0::2])
            # Layers come in repeated blocks: the form that followed this one last time
            # usually follows it again, and comparing costs less than hashing.
            if markup == previous.next_markup:
                form = previous.next_form
            else:
                form = forms.get(markup)
                if form is None:
                    if len(forms) >= _FEW_FORMS and len(forms) * _FORMS_PER_LAYER > len(layers):
                        raise _NotPlain("so many forms of layer that reading them one by one is faster")
                    form = forms[markup] = self._layer_form(parts, markup)
                previous.next_markup, previous.next_form = form.markup, form
            previous = form
            _check_values(parts)
            values = parts[1::2]
            values += (None, "")
            lid, type_name, version = values[form.id_at], values[form.type_at], values[form.version_at]
            if not lid.lstrip("-").isdigit():
                raise _NotPlain("a layer id that is not an integer")
            resolved = versions.get((type_name, version))
            if resolved is None:
                try:
                    resolved = versions[(type_name, version)] = resolve_version(type_name, version)
                except VersionLookupError:
                    raise _NotPlain("an unknown operation") from None
            layer = form.build(values, line, lid, resolved)
            if lid in layers:
                add_layer(layers, layer)   # reports the duplicate
            else:
                layers[lid] = layer
            line += form.newlines
        return layers, line

    def edges(self, start: int, end: int, start_line: int) -> list[Edge]:
        at, line = self._first(start, end, "edge", start_line)
        edges = self._uniform_edges(at, end, line)
        if edges is not None:
            return edges
        plans = self.edge_plans
        edges = []
        for parts in self._chunks(at, end, "edge"):
            markup = tuple(parts[0::2])
            plan = plans.get(markup)
            if plan is None:
                plan = plans[markup] = self._edge_plan(parts)
            newlines, (a, b, c, d), line_at = plan
            _check_values(parts)
            edges.append(Edge(parts[2 * a + 1], parts[2 * b + 1], parts[2 * c + 1], parts[2 * d + 1],
                              line + line_at))
            line += newlines
        return edges

    def _uniform_edges(self, at: int, end: int, line: int) -> list[Edge] | None:
        """The edges from `at` on when all are written alike (as a serializer writes them):
        read from one split of the whole section; None when they are not."""
        text = self.text
        parts = text[at + len("<edge "):end].split('"')
        count = len(parts) // 8    # an edge has four attributes: eight parts, the last runs into the next edge
        if count < 2 or len(parts) != 8 * count + 1 or any(len(set(parts[i::8])) != 1 for i in (2, 4, 6)) \
                or len(set(parts[8:-1:8])) != 1:
            return None
        between = parts[8].split("<edge ")
        if len(between) != 2 or between[1] != parts[0]:
            return None
        head = (parts[0], parts[2], parts[4], parts[6])
        plans = self.edge_plans
        found = []
        for markup in (head + (between[0],), head + (parts[-1],)):
            plan = plans.get(markup)
            if plan is None:
                plan = plans[markup] = self._edge_plan([parts[0], "", parts[2], "", parts[4], "", parts[6], "",
                                                        markup[-1]])
            found.append(plan)
        (newlines, ends, line_at), last = found
        if last[1:] != (ends, line_at):
            return None
        _check_values(parts)
        columns = [parts[i::8] for i in (1, 3, 5, 7)]
        first = line + line_at
        lines = range(first, first + count * newlines, newlines) if newlines else itertools.repeat(first, count)
        return list(map(Edge, *(columns[i] for i in ends), lines))


def parse_fast(data: bytes, reader: ElementReader):
    """(root, top-level layers, top-level edges) through the fast path, or None where it does not apply.

    `reader` may have reported duplicate layers when None is returned: start it afresh.
    """
    # (libxml2 reads CR as a line end; values with other control characters are refused below.)
    if b"\r" in data or b"xmlns" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = _PROLOGUE.match(text)
    if head is None or _PH_OPEN in text or _PH_CLOSE in text:
        return None
    declared = _ENCODING.search(head.group("decl") or "")
    if declared and declared.group(1).lower() not in ("utf-8", "utf8"):
        return None
    layers_start = head.end()
    layers_end = text.find("</layers>", layers_start)
    between = _BETWEEN_SECTIONS.match(text, layers_end + len("</layers>")) if layers_end >= 0 else None
    if between is None:
        return None
    edges_start = between.end()
    edges_end = text.find("</edges>", edges_start)
    if edges_end < 0:
        return None
    # An entity or character reference in a value would need resolving.  (Comments, CDATA,
    # processing instructions and nested sections are refused by the plans, unusual values
    # by `_check_values`.)
    if text.find("&", layers_start, layers_end) >= 0 or text.find("&", edges_start, edges_end) >= 0:
        return None
    fast = _FastReader(text, reader)
    try:
        layers, line = fast.layers(layers_start, layers_end)
        edges = fast.edges(edges_start, edges_end, line + text.count("\n", layers_end, edges_start))
    except _NotPlain:
        return None
    skeleton = (text[:layers_start] + text[layers_end:edges_start] + text[edges_end:]).encode("utf-8")
    try:
        root = etree.fromstring(skeleton, safe_parser())
    except (etree.XMLSyntaxError, ValueError):
        return None
    if root.tag != "net":
        return None
    return root, layers, edges

