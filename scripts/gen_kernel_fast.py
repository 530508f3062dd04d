#!/usr/bin/env python3
"""Generate lean/Serq/KernelFast.lean and lean/Serq/KernelFastEq.lean from the kernel interpreter.

    python3 scripts/gen_kernel_fast.py          # write the two modules
    python3 scripts/gen_kernel_fast.py --check  # exit 1 if they are not what the kernel sources give

`Serq.Kernel.Fast` is a copy of the interpreter's functions (`lean/Serq/KernelMachine.lean`,
`KernelMemory.lean`, `Kernel.lean`, `KernelOracle.lean`; their types are not copied) in a form the
Lean kernel evaluates in about half the time (docs/lean.md, "Oracle theorems"):

- a structural recursion on a `Nat`/`List` argument whose recursive calls all pass the same parameters and
  the argument's predecessor/tail becomes `Nat.rec`/`List.rec` applied directly, its two cases as
  definitions of their own (`f.base`, `f.step`; `f.rec` the recursion on the argument, `f` the original's
  argument order), instead of the `brecOn` and matchers the equation compiler builds (every unfolding of
  a universe-polymorphic `brecOn`/matcher copies its value);
- the list index helpers (`getAt`, `setThread`, ...) become `List.rec` with `Nat.casesOn`;
- every other function that calls one of these (directly or through another) is copied as it is, so
  that its calls name the copies (a call by dot notation, `m.put th`, still names `Serq.Kernel`'s);
  a recursive function that is not rewritten is not copied (the copies call `Serq.Kernel`'s).

`Serq.KernelFastEq` proves every copy equal to the original (`Fast.f_eq : Fast.f = Serq.Kernel.f`),
in the order of the sources, ending with `Fast.agreesWithVllm_eq`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERQ = ROOT / "lean" / "Serq"
SOURCES = ["KernelMachine", "KernelMemory", "Kernel", "KernelOracle"]
OUT = SERQ / "KernelFast.lean"
OUT_EQ = SERQ / "KernelFastEq.lean"

IDENT = r"[A-Za-z_][A-Za-z0-9_']*"
QUAL = IDENT + r"(?:\." + IDENT + r")*"
TOKEN = re.compile(r"(?<![A-Za-z0-9_'.])" + QUAL)


def kernel_text() -> str:
    parts = []
    for name in SOURCES:
        s = (SERQ / f"{name}.lean").read_text()
        i = s.index("namespace Serq.Kernel\n") + len("namespace Serq.Kernel\n")
        j = s.rindex("end Serq.Kernel")
        parts.append(s[i:j])
    return "\n".join(parts)


def strip_comments(s: str) -> str:
    s = re.sub(r"/-.*?-/", "", s, flags=re.S)
    return "\n".join(re.sub(r"\s*--.*$", "", ln) for ln in s.split("\n"))


def chunks(src: str) -> list[str]:
    """The top-level declarations, each as its lines (a declaration starts at column 0)."""
    out: list[list[str]] = []
    for ln in strip_comments(src).split("\n"):
        if not ln.strip():
            continue
        if ln[0] != " " and not ln.startswith("where"):
            out.append([ln])
        elif out:
            out[-1].append(ln)
    res = []
    for c in out:
        body = "\n".join(c[1:])
        while True:
            new = explicit_calls(body)
            if new == body:
                break
            body = new
        res.append("\n".join([c[0]] + ([body] if len(c) > 1 else [])))
    return res


# Calls by dot notation (`m.put th`) name `Serq.Kernel.Machine.put` whatever the namespace; those of the
# `Machine` functions the copy rewrites are written as explicit calls (`Machine.put (m := m) th`), which
# name the copy. (`served` is also a field's name, so its calls stay.)
METHODS = ["put", "setTimer", "addJob", "advanceHolds", "admitWaiter", "preempt", "serveOne", "grown"]
OPEN = {")": "(", "}": "{", "⟩": "⟨", "]": "["}


def explicit_calls(body: str) -> str:
    pat = re.compile(r"\.(" + "|".join(METHODS) + r")(?![A-Za-z0-9_'])")
    out, pos = "", 0
    for m in pat.finditer(body):
        j = m.start()
        if j == 0:
            continue
        if body[j - 1] in OPEN:
            depth, i = 0, j - 1
            while i >= 0:
                if body[i] in OPEN:
                    depth += 1
                elif body[i] in OPEN.values():
                    depth -= 1
                    if depth == 0:
                        break
                i -= 1
            if i < pos:
                continue
            start = i
        else:
            i = j
            while i > 0 and re.match(r"[A-Za-z0-9_'.]", body[i - 1]):
                i -= 1
            start = i
            recv = body[start:j]
            if not recv or recv[0].isupper() or not re.match(r"[a-z_]", recv[0]) or start < pos:
                continue
        recv = body[start:j]
        if "\n" in recv:
            # a receiver over several lines keeps its column, so that its lines keep their places
            col = start - (body.rfind("\n", 0, start) + 1)
            recv = "\n" + " " * col + recv
        sep = "" if recv.startswith("\n") else " "
        out += body[pos:start] + f"(Machine.{m.group(1)} (m :={sep}{recv}))"
        pos = m.end()
    return out + body[pos:]


def split_arrows(t: str) -> list[str]:
    parts, depth, cur, i = [], 0, "", 0
    while i < len(t):
        c = t[i]
        if c in "([":
            depth += 1
        if c in ")]":
            depth -= 1
        if depth == 0 and t.startswith(" → ", i):
            parts.append(cur.strip())
            cur = ""
            i += 3
            continue
        cur += c
        i += 1
    parts.append(cur.strip())
    return parts


def param_names(params: str) -> list[str]:
    names: list[str] = []
    for grp in re.findall(r"\(([^():]+):", params):
        names += grp.split()
    return names


def tokens(s: str) -> set[str]:
    return set(TOKEN.findall(s))


class Decl:
    def __init__(self, name: str, text: str, kind: str, **kw):
        self.name, self.text, self.kind = name, text, kind
        self.__dict__.update(kw)


def parse_header(text: str):
    """(name, params, type, body lines) of a `def`, the header joined up to its `:=` or alternatives."""
    lines = text.split("\n")
    m = re.match(r"def (" + QUAL + r")", lines[0])
    if not m:
        return None
    hdr = lines[0]
    k = 1
    while ":=" not in hdr and k < len(lines) and not lines[k].startswith("  | "):
        hdr += " " + lines[k].strip()
        k += 1
    return m.group(1), hdr, lines[k:]


def signature(text: str):
    """(name, explicit parameters, the type's arrows, alternative lines) of a `def` by alternatives
    (its type after the parameters, no `:=` in the header), or None."""
    ph = parse_header(text)
    if ph is None:
        return None
    name, hdr, alts = ph
    m = re.match(r"def (" + QUAL + r")((?: \([^)]*\))*) : (.*)$", hdr)
    if not m or ":=" in m.group(3):
        return None
    return name, m.group(2), split_arrows(m.group(3)), alts


def mentions(name: str, text: str) -> bool:
    """`text` names `name` as a whole identifier (not as a field or a longer name's part)."""
    return re.search(r"(?<![A-Za-z0-9_'.])" + re.escape(name) + r"(?![A-Za-z0-9_'])", text) is not None


def rec_form(text: str):
    """The two-alternative structural recursion on the first argument, or None."""
    sig = signature(text)
    if sig is None:
        return None
    name, params, arrows, alts = sig
    first, rest = arrows[0], arrows[1:]
    if not rest or not alts or not alts[0].startswith("  | "):
        return None
    top = [i for i, ln in enumerate(alts) if ln.startswith("  | ")]
    if len(top) != 2:
        return None
    a0, a1 = alts[top[0]:top[1]], alts[top[1]:]

    def pats(line):
        mm = re.match(r"  \| (.*?) =>(.*)$", line)
        if not mm:
            return None
        return [x.strip() for x in mm.group(1).split(",")], mm.group(2)

    p0, p1 = pats(a0[0]), pats(a1[0])
    if not p0 or not p1:
        return None
    (ps0, rhs0), (ps1, rhs1) = p0, p1
    nrest = len(rest) - 1
    if len(ps0) != nrest + 1 or len(ps1) != nrest + 1:
        return None
    if not all(re.fullmatch(IDENT, x) for x in ps0[1:] + ps1[1:]):
        return None
    pnames = param_names(params)
    if first == "Nat" and ps0[0] == "0":
        mm = re.fullmatch(r"(" + IDENT + r") \+ 1", ps1[0])
        if not mm:
            return None
        v = mm.group(1)
        binders = [(v, "Nat")]
        rec = "Nat"
    elif first.startswith("List ") and ps0[0] == "[]":
        mm = re.fullmatch(r"(" + IDENT + r") :: (" + IDENT + r")", ps1[0])
        if not mm:
            return None
        v = mm.group(2)
        elem = first[len("List "):]
        binders = [(mm.group(1), elem), (v, first)]
        rec = "List"
    else:
        return None
    if len(a0) != 1:
        base = "\n".join([rhs0] + a0[1:])
    else:
        base = rhs0
    body = "\n".join([rhs1] + a1[1:])
    call = r"(?<![A-Za-z0-9_'.])" + re.escape(name) + " " + " ".join(re.escape(x) for x in pnames + [v]) + r"(?![A-Za-z0-9_'])"
    newbody, n = re.subn(call, "kfih", body)
    if mentions(name, newbody) or mentions(name, base):
        return None
    return dict(params=params, pnames=pnames, first=first, motive=" → ".join(rest),
                rec=rec, binders=binders, v=v, b0=ps0[1:], b1=ps1[1:], base=base, body=newbody)


GET = re.compile(r"def (\w+) : List (\w+) → Nat → (\w+)\n  \| \[\], _ => (.*)\n  \| (\w+) :: _, 0 => \5\n"
                 r"  \| _ :: (\w+), (\w+) \+ 1 => \1 \6 \7$")
SET = re.compile(r"def (\w+) : List (\w+) → Nat → \2 → List \2\n  \| \[\], _, _ => \[\]\n  \| _ :: (\w+), 0, (\w+) => \4 :: \3\n"
                 r"  \| (\w+) :: (\w+), (\w+) \+ 1, (\w+) => \5 :: \1 \6 \7 \8$")



def split_top(s: str, sep: str = ",") -> list[str]:
    """`s` split at the separators outside brackets."""
    parts, depth, cur = [], 0, ""
    for c in s:
        if c in "([{⟨":
            depth += 1
        elif c in ")]}⟩":
            depth -= 1
        if c == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    parts.append(cur.strip())
    return parts


def parse_arg(s: str, i: int) -> tuple[str, int] | None:
    """One argument of an application at `s[i:]` (after blanks): (its text, the index after it)."""
    while i < len(s) and s[i] in " \n":
        i += 1
    if i >= len(s):
        return None
    c = s[i]
    if c in "([{⟨":
        close = {"(": ")", "[": "]", "{": "}", "⟨": "⟩"}
        depth, j = 0, i
        while j < len(s):
            if s[j] in "([{⟨":
                depth += 1
            elif s[j] in ")]}⟩":
                depth -= 1
                if depth == 0:
                    return s[i:j + 1], j + 1
            j += 1
        return None
    m = re.match(r"\.?[A-Za-z_][A-Za-z0-9_'.]*|[0-9]+", s[i:])
    if not m or m.group(0) in ("then", "else", "with", "fun", "let", "if", "match", "do", "in"):
        return None
    return m.group(0), i + m.end()


def replace_calls(body: str, name: str, pnames: list[str], nargs: int, k: int, tail: str):
    """`body` with every call `name pnames a_1 .. a_nargs` whose `a_k` is `tail` as `(kfih <the others>)`;
    None if a call is not of that form."""
    own = re.compile(r"(?<![A-Za-z0-9_'.])" + re.escape(name) + r"(?![A-Za-z0-9_'])")
    out, pos = "", 0
    while True:
        m = own.search(body, pos)
        if not m:
            return out + body[pos:]
        i = m.end()
        spans = []
        for _ in range(len(pnames) + nargs):
            a = parse_arg(body, i)
            if a is None:
                return None
            spans.append((a[1] - len(a[0]), a[1], a[0]))
            i = a[1]
        args = [t for _, _, t in spans]
        if args[:len(pnames)] != pnames or args[len(pnames) + k] != tail:
            return None
        # the head and the parameters become `kfih`, the argument recursed on is dropped, the others stay in place
        head_end = spans[len(pnames) - 1][1] if pnames else m.end()
        a0, a1, _ = spans[len(pnames) + k]
        cut_from = a0
        while cut_from > 0 and body[cut_from - 1] == " ":
            cut_from -= 1
        out += body[pos:m.start()] + "kfih" + body[head_end:cut_from] + body[a1:i]
        pos = i


def grec_form(text: str):
    """A structural recursion on one `List`/`Nat` argument with any alternatives, or None."""
    sig = signature(text)
    if sig is None:
        return None
    name, params, arrows, alts = sig
    if not alts or not alts[0].startswith("  | "):
        return None
    argtys, res = arrows[:-1], arrows[-1]
    n = len(argtys)
    top = [i for i, ln in enumerate(alts) if ln.startswith("  | ")]
    groups = [alts[a:b] for a, b in zip(top, top[1:] + [len(alts)])]
    parsed = []
    for g in groups:
        mm = re.match(r"  \| (.*?) =>(.*)$", g[0])
        if not mm:
            return None
        ps = split_top(mm.group(1))
        if len(ps) != n:
            return None
        parsed.append((ps, "\n".join([mm.group(2)] + g[1:])))
    pnames = param_names(params)
    for k in range(n):
        t = argtys[k]
        if t != "Nat" and not t.startswith("List "):
            continue
        nil_alts, cons_alts, ok = [], [], True
        for ps, body in parsed:
            pk = ps[k]
            others = ps[:k] + ps[k + 1:]
            if t == "Nat":
                mz = pk == "0"
                ms = re.fullmatch(r"(" + IDENT + r") \+ 1", pk)
                hp, tv = None, (ms.group(1) if ms else None)
            else:
                mz = pk == "[]"
                ms = None
                if pk.count("::") == 1 and "::" in pk and not pk.startswith("("):
                    hp, tv = [x.strip() for x in pk.split("::")]
                    ms = re.fullmatch(IDENT, tv)
                else:
                    hp, tv = None, None
            if mz:
                if mentions(name, body):
                    ok = False
                    break
                nil_alts.append((others, body))
            elif ms:
                nb = replace_calls(body, name, pnames, n, k, tv)
                if nb is None:
                    ok = False
                    break
                cons_alts.append((([hp, tv] if t != "Nat" else [tv]) + others, nb))
            elif pk == "_":
                if mentions(name, body):
                    ok = False
                    break
                nil_alts.append((others, body))
                cons_alts.append(((["_", "_"] if t != "Nat" else ["_"]) + others, body))
            else:
                ok = False
                break
        if not ok or not cons_alts:
            continue
        # the variables with a pattern that is not a name, for the equality proof's case splits
        return dict(params=params, pnames=pnames, argtys=argtys, res=res, k=k, first=t,
                    rec="Nat" if t == "Nat" else "List", nil_alts=nil_alts, cons_alts=cons_alts)
    return None


def render_match(scrut: list[str], alts) -> str:
    if not scrut:
        return alts[0][1]
    lines = ["\n    match " + ", ".join(scrut) + " with"]
    for ps, body in alts:
        lines.append("    | " + ", ".join(ps) + " =>" + body.replace("\n", "\n  "))
    return "\n".join(lines)


def classify(text: str) -> Decl | None:
    if not text.startswith("def "):
        return None
    name = re.match(r"def (" + QUAL + r")", text).group(1)
    m = GET.fullmatch(text)
    if m:
        return Decl(name, text, "get", elem=m.group(2), res=m.group(3), default=m.group(4))
    m = SET.fullmatch(text)
    if m:
        return Decl(name, text, "set", elem=m.group(2))
    rf = rec_form(text)
    if rf:
        return Decl(name, text, "rec", **rf)
    gf = grec_form(text)
    if gf:
        return Decl(name, text, "grec", **gf)
    body = text.split("\n", 1)[1] if "\n" in text else text.split(":=", 1)[1]
    if mentions(name, body) or re.search(r"^where$", text, flags=re.M):
        return Decl(name, text, "skip")
    return Decl(name, text, "copy")


def grec_parts(d: Decl):
    n = len(d.argtys)
    kb = [f"kfb{i}" for i in range(n)]
    others = kb[:d.k] + kb[d.k + 1:]
    otys = d.argtys[:d.k] + d.argtys[d.k + 1:]
    motive = " → ".join(otys + [d.res])
    return kb, others, otys, motive


def drop_names(scrut: list[str], alts):
    """The scrutinees every alternative only names (by one name, or `_`) are bound by that name instead of
    matched: (the binders' names, of which those not matched, the `match` on the others)."""
    keep, names = [], []
    for j, v in enumerate(scrut):
        pats = [ps[j] for ps, _ in alts]
        named = {x for x in pats if x != "_"}
        if all(re.fullmatch(IDENT, x) for x in pats) and len(named) <= 1:
            names.append(named.pop() if named else v)
        else:
            keep.append(j)
            names.append(v)
    if not keep:
        return names, names, alts[0][1]
    rest = [(ps_[:0] + [ps_[j] for j in keep], b) for ps_, b in alts]
    return names, names, render_match([scrut[j] for j in keep], rest)


def render_grec(d: Decl) -> str:
    kb, others, otys, motive = grec_parts(d)
    ps = d.params
    allvar = lambda pats: all(re.fullmatch(IDENT, x) for x in pats)
    lam = (" fun " + " ".join(others) + " =>") if others else ""
    # a first alternative of names only is the case's only one: its names bind, no `match`
    if not others:
        nil_body = d.nil_alts[0][1]
    elif allvar(d.nil_alts[0][0]):
        nil_body = d.nil_alts[0][1]
        lam = " fun " + " ".join(d.nil_alts[0][0]) + " =>"
    else:
        _, lamv, nil_body = drop_names(others, d.nil_alts)
        lam = " fun " + " ".join(lamv) + " =>"
    base = f"def {d.name}.base{ps} : {motive} :={lam}{nil_body}"
    kv = ["kfx", "kfxs"] if d.rec == "List" else ["kfn"]
    first_pats, first_body = d.cons_alts[0]
    if allvar(first_pats):
        names = [x if x != "_" else k for x, k in zip(first_pats, kv)]
        lam = (" fun " + " ".join(first_pats[len(kv):]) + " =>") if others else ""
        body = first_body
    else:
        names, lamv, body = drop_names(kv + others, d.cons_alts)
        names, lamv = names[:len(kv)], lamv[len(kv):]
        lam = (" fun " + " ".join(lamv) + " =>") if lamv else ""
    if d.rec == "List":
        binds = f"({names[0]} : {d.first[len('List '):]}) ({names[1]} : {d.first})"
    else:
        binds = f"({names[0]} : Nat)"
    step = f"def {d.name}.step{ps} {binds} (kfih : {motive}) : {motive} :={lam}{body}"
    rec = (f"def {d.name}.rec{ps} (xarg : {d.first}) : {motive} :=\n"
           f"  {d.rec}.rec (motive := fun _ => {motive}) ({' '.join([d.name + '.base'] + d.pnames)})\n"
           f"    (fun {' '.join(kv)} kfih => {' '.join([d.name + '.step'] + d.pnames + kv)} kfih) xarg")
    main = (f"def {d.name}{ps} : {' → '.join(d.argtys + [d.res])} :=\n"
            f"  fun {' '.join(kb)} => {' '.join([d.name + '.rec'] + d.pnames + [kb[d.k]] + others)}")
    return "\n\n".join([base, step, rec, main])


def render_def(d: Decl) -> str:
    if d.kind == "copy":
        return d.text
    if d.kind == "grec":
        return render_grec(d)
    if d.kind == "get":
        return (f"def {d.name} (l : List {d.elem}) (i : Nat) : {d.res} :=\n"
                f"  List.rec (motive := fun _ => Nat → {d.res}) (fun _ => {d.default})\n"
                f"    (fun x _ ih i => Nat.casesOn (motive := fun _ => {d.res}) i x (fun j => ih j)) l i")
    if d.kind == "set":
        e = d.elem
        return (f"def {d.name} (l : List {e}) (i : Nat) (v : {e}) : List {e} :=\n"
                f"  List.rec (motive := fun _ => Nat → List {e}) (fun _ => [])\n"
                f"    (fun x xs ih i => Nat.casesOn (motive := fun _ => List {e}) i (v :: xs) (fun j => x :: ih j)) l i")
    # rec
    ps = d.params
    args = " ".join(d.pnames)
    app = " ".join([f"{d.name}.base"] + d.pnames)
    kb = ["kfx", "kfxs"] if d.rec == "List" else ["kfn"]
    binds = " ".join(f"({b} : {t})" for b, t in d.binders)

    def lam(bs: list[str], body: str) -> str:
        return (" fun " + " ".join(bs) + " =>" if bs else "") + body

    base = f"def {d.name}.base{ps} : {d.motive} :={lam(d.b0, d.base)}"
    step = f"def {d.name}.step{ps} {binds} (kfih : {d.motive}) : {d.motive} :={lam(d.b1, d.body)}"
    main = (f"def {d.name}{ps} (xarg : {d.first}) : {d.motive} :=\n"
            f"  {d.rec}.rec (motive := fun _ => {d.motive}) ({app})\n"
            f"    (fun {' '.join(kb)} kfih => {' '.join([d.name + '.step'] + d.pnames + kb)} kfih) xarg")
    return "\n\n".join([base, step, main])


def render_eq(d: Decl, copied: dict[str, Decl]) -> str:
    orig = f"Serq.Kernel.{d.name}"
    head = f"theorem {d.name}_eq : @{d.name} = @{orig} := by\n"

    def rws(text: str) -> str:
        used = [n for n in copied if n != d.name and n in tokens(text)]
        return "".join(f"  all_goals (try rw [{n}_eq])\n" for n in used)

    if d.kind == "copy":
        return head + f"  delta {d.name}\n" + rws(d.text) + "  all_goals rfl"
    if d.kind == "grec":
        kb, others, otys, motive = grec_parts(d)
        args = d.pnames
        kv = ["kfx", "kfxs"] if d.rec == "List" else ["kfn"]
        lam = ("fun " + " ".join(f"({b} : {t})" for b, t in zip(others, otys)) + " => ") if others else ""
        full = " ".join([orig] + args + kb[:d.k] + ["xarg"] + kb[d.k + 1:])
        fx = (" funext " + " ".join(others) + "\n") if others else ""
        nonvar = lambda alts, names: [nm for j, nm in enumerate(names)
                                      if any(not re.fullmatch(IDENT, ps[j]) for ps, _ in alts)]
        def closer(vs: list[str], ind: str) -> str:
            tries = ["rfl"]
            if vs:
                tries.append("(" + " <;> ".join(f"cases {v}" for v in vs) + " <;> rfl)")
            return f"{ind}all_goals (first | {' | '.join(tries)})\n"
        s = head + f"  have h : ∀{d.params} (xarg : {d.first}), {' '.join([d.name + '.rec'] + args)} xarg = {lam}{full} := by\n"
        s += f"    intro {' '.join(args + ['xarg'])}\n    induction xarg with\n"
        s += f"    | {'nil' if d.rec == 'List' else 'zero'} =>\n" + ("     " + fx if others else "")
        s += f"      show {' '.join([d.name + '.base'] + args + others)} = _\n      delta {d.name}.base\n"
        s += rws(d.text).replace("  all_goals", "      all_goals")
        s += closer(nonvar(d.nil_alts, others), "      ")
        s += f"    | {'cons kfx kfxs ih' if d.rec == 'List' else 'succ kfn ih'} =>\n" + ("     " + fx if others else "")
        s += (f"      show {' '.join([d.name + '.step'] + args + kv)} ({' '.join([d.name + '.rec'] + args + [kv[-1]])}) "
              f"{' '.join(others)} = _\n".replace(" \n", "\n").replace("  =", " ="))
        s += "      rw [ih]\n" + f"      delta {d.name}.step\n"
        s += rws(d.text).replace("  all_goals", "      all_goals")
        s += closer(nonvar(d.cons_alts, kv + others), "      ")
        cf = f"h {' '.join(args + [kb[d.k]])}".replace("  ", " ")
        for o in others:
            cf = f"congrFun ({cf}) {o}"
        s += f"  funext {' '.join(args + kb)}\n  exact {cf}"
        return s
    if d.kind in ("get", "set"):
        extra = " v" if d.kind == "set" else ""
        succ = "exact congrArg (List.cons x) (ih j)" if d.kind == "set" else "exact ih j"
        return (head + f"  funext l i{extra}\n  induction l generalizing i with\n  | nil => rfl\n"
                f"  | cons x xs ih => cases i with\n    | zero => rfl\n    | succ j => {succ}")
    args = d.pnames
    if d.rec == "Nat":
        kb, case1 = ["kfn"], "succ kfn ih"
    else:
        kb, case1 = ["kfx", "kfxs"], "cons kfx kfxs ih"
    case0 = "zero" if d.rec == "Nat" else "nil"
    app = " ".join([d.name] + args + [kb[-1]])
    s = head + f"  funext {' '.join(args + ['xarg'])}\n  induction xarg with\n"
    s += f"  | {case0} =>\n    show {' '.join([d.name + '.base'] + args)} = _\n    delta {d.name}.base\n"
    s += rws(d.base).replace("  all_goals", "    all_goals") + "    all_goals rfl\n"
    s += (f"  | {case1} =>\n    show {' '.join([d.name + '.step'] + args + kb)} ({app}) = _\n    rw [ih]\n"
          f"    delta {d.name}.step\n")
    s += rws(d.body).replace("  all_goals", "    all_goals") + "    all_goals rfl"
    return s



HEADER = '''module

public import Serq.KernelOracle

/-! # The kernel interpreter, in the form the Lean kernel evaluates fastest

Generated by `scripts/gen_kernel_fast.py` from `Serq.KernelMachine`, `Serq.KernelMemory`,
`Serq.Kernel` and `Serq.KernelOracle`: do not edit; run the script after changing those.
`Serq.Kernel.Fast` has a copy of the interpreter's functions (not of its types) with each structural
recursion written as `Nat.rec`/`List.rec` applied directly, its two cases as definitions of their
own, instead of the `brecOn` and matchers the equation compiler builds: the kernel's unfolding of a
universe-polymorphic constant (a matcher, `brecOn`) copies its whole value, and that substitution was
most of the oracle theorems' time (docs/lean.md, "Oracle theorems"). `Serq.KernelFastEq` proves every
copy equal to its original; the oracle theorems (`Serq.Oracle.*`) are stated about `Serq.Kernel` and
evaluated with the copy. The copies are `noncomputable` (the compiler does not take `Nat.rec`); the
kernel does not need code.
-/
@[expose] public section
noncomputable section
set_option linter.unusedVariables false

namespace Serq.Kernel.Fast
'''

HEADER_EQ = '''module

public import Serq.KernelFast

/-! # The fast copy of the interpreter is the interpreter

Generated by `scripts/gen_kernel_fast.py` with `Serq.KernelFast`: for every function `f` copied there,
`Fast.f_eq : Fast.f = Serq.Kernel.f`, in the order of the sources (a copy's calls name earlier copies,
which are rewritten to the originals by their `_eq`; a rewritten recursion by induction on the argument
it recurses on, its cases by the equations' definitional unfolding). The last, `agreesWithVllm_eq`, is
what the oracle theorems (`Serq.Oracle.*`) rewrite with.
-/
@[expose] public section

namespace Serq.Kernel.Fast
'''


def build() -> tuple[str, str]:
    decls = [d for d in (classify(c) for c in chunks(kernel_text())) if d is not None]
    fast = {d.name for d in decls if d.kind in ("rec", "grec", "get", "set")}
    copied = set(fast)
    changed = True
    while changed:
        changed = False
        for d in decls:
            if d.kind == "copy" and d.name not in copied and tokens(d.text.split("\n", 1)[-1] if "\n" in d.text else d.text) & copied:
                copied.add(d.name)
                changed = True
    order = [d for d in decls if d.name in copied]
    defs = "\n\n".join(render_def(d) for d in order)
    seen: dict[str, Decl] = {}
    eqs = []
    for d in order:
        eqs.append(render_eq(d, seen))
        seen[d.name] = d
    fast_text = HEADER + "\n" + defs + "\n\nend Serq.Kernel.Fast\n"
    eq_text = HEADER_EQ + "\n" + "\n\n".join(eqs) + "\n\nend Serq.Kernel.Fast\n"
    return fast_text, eq_text


def main() -> int:
    check = "--check" in sys.argv[1:]
    fast_text, eq_text = build()
    bad = 0
    for path, text in ((OUT, fast_text), (OUT_EQ, eq_text)):
        if check:
            if not path.exists() or path.read_text() != text:
                print(f"{path.relative_to(ROOT)} is not what scripts/gen_kernel_fast.py gives; run it", file=sys.stderr)
                bad = 1
        else:
            path.write_text(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
