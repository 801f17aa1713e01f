"""``nicbench serve``'s application: server-rendered pages over the archive.

Pages: runs (filterable, paged), run (report, figures, tables, host facts,
tuning, warnings, raw outputs to download), live run (server-sent events fed
by the archive the running process writes), compare, trend (with the
regression flag).  JavaScript only for the live page (EventSource).

Security, since it shows lab data on a local port:
- every value is escaped by the templates (Jinja2 autoescape), SVG text by ``svg.py``;
- a Content-Security-Policy on every response (scripts and styles only from
  /static, no inline code, no framing), plus nosniff and no referrer;
- requests whose Host header is not one of the names this server was
  started for are refused (DNS rebinding);
- no endpoint takes a file path: runs by id, raw outputs by number, report
  files by plain name inside the run's rendered report; nothing runs a command;
- the one state-changing request (tagging a run) needs the server's token and
  a same-origin ``Origin``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core.errors import InputError, NicbenchError, StoreError
from ..registry import VIEWS
from ..report.timeline import timeline_stem
from ..report.view import StudyView
from ..store.archive import RunFilter, parse_when
from ..store.location import StoreLocation, cache_home
from ..store.names import NAME
from . import abpages, data
from .charts import chart_data

HERE = Path(__file__).parent
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
# a study's own report page is shown as it was rendered (it has inline styles): sandboxed, no scripts at all
REPORT_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox; frame-ancestors 'none'"
LIVE_POLL_S = 0.5


class SecurityHeaders:
    """CSP and friends on every response, and the server time it took
    (``Server-Timing``: what the benchmark reads)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-security-policy"]
                own = dict(message.get("headers", []))
                csp = own.get(b"content-security-policy", CSP.encode())
                headers += [(b"content-security-policy", csp), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                            (b"cache-control", own.get(b"cache-control", b"no-store")),
                            (b"server-timing", f"app;dur={(time.perf_counter() - t0) * 1000:.1f}".encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Dashboard:
    """The pages, bound to one archive location and one token."""

    def __init__(self, loc: StoreLocation, token: str, views: Mapping[str, StudyView] = VIEWS,
                 cache_root: Path | None = None):
        self.loc = loc
        self.token = token
        self.views = views
        self.archives = data.Archives(loc)
        self.cache = data.ViewCache()
        self.cache_root = cache_root or data_cache(loc)
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                                      undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.filters["when"] = _when
        self.env.filters["num"] = _num
        self.env.globals["qs"] = _qs

    # ---- plumbing ----
    def page(self, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(store=self.loc.display, token=self.token, **ctx)
        return HTMLResponse(html, status_code=status)

    def error(self, e: NicbenchError) -> HTMLResponse:
        missing = isinstance(e, StoreError) and ("no run" in e.message or "no A/B" in e.message)
        status = 404 if missing or "no such run" in e.message else 400 if isinstance(e, InputError) else 500
        return self.page("error.html.j2", status=status, message=e.one_line())

    async def guarded(self, fn: Callable[[], Response]) -> Response:
        """``fn`` in a worker thread (the archive calls block), errors as pages."""
        try:
            return await run_in_threadpool(fn)
        except NicbenchError as e:
            if isinstance(e, StoreError) and "unreachable" in e.message:
                self.archives.drop()
            return self.error(e)

    # ---- pages ----
    async def runs(self, request: Request) -> Response:
        q = request.query_params

        def go() -> Response:
            f = _filter(q)
            page = _int(q.get("page"), 1)
            ctx = data.runs_page(self.archives.get(), f, page)
            return self.page("runs.html.j2", q=dict(q), filters=_FILTER_FIELDS, **ctx)
        return await self.guarded(go)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]

        def go() -> Response:
            a = self.archives.get()
            row = data.row_of(a, run_id)
            sv = self.views.get(row.study)
            if sv is None:
                raise StoreError(f"no view for study {row.study!r} in this nicbench", where=row.run_id)
            if row.status == "running":
                lv = data.live(a, row, self.views, self.cache)
                return self.page("live.html.j2", row=row, live=lv, stale=data.stale_note(row))
            view = self.cache.get(a, row, self.views)
            out = data.report_dir(self.cache_root, row, view, sv)
            pngs = sorted(p.name for p in out.glob("*.png"))
            ctx = data.run_context(a, row, view, sv)
            timelines = {r["point"]: f"{timeline_stem(str(r['point']))}.png" for r in ctx["rows"]
                         if f"{timeline_stem(str(r['point']))}.png" in pngs}
            return self.page("run.html.j2", timelines=timelines, charts=chart_data(sv.charts, [("", ctx["rows"])]),
                             **ctx)
        return await self.guarded(go)

    async def timeline(self, request: Request) -> Response:
        """One point's timeline as JSON (the run page draws it when its point is opened)."""
        run_id, point = request.path_params["run_id"], request.query_params.get("point") or ""

        def go() -> Response:
            a = self.archives.get()
            row = data.row_of(a, run_id)
            sv = self.views.get(row.study)
            if sv is None:
                return JSONResponse({"error": "no view for this study"}, status_code=404)
            try:
                got = data.timeline(self.cache.get(a, row, self.views), sv, point)
            except StoreError as e:
                return JSONResponse({"error": e.one_line()}, status_code=404)
            return JSONResponse(got, headers={"cache-control": "private, max-age=60"})
        return await self.guarded(go)

    async def report_file(self, request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params.get("name") or "index.html"

        def go() -> Response:
            a = self.archives.get()
            row = data.row_of(a, run_id)
            sv = self.views.get(row.study)
            if sv is None or row.status == "running":
                return PlainTextResponse("no report yet", status_code=404)
            out = data.report_dir(self.cache_root, row, self.cache.get(a, row, self.views), sv)
            p = data.report_file(out, name)
            if p is None:
                return PlainTextResponse("not found", status_code=404)
            headers = {"content-security-policy": REPORT_CSP, "cache-control": "private, max-age=60"}
            if p.suffix in (".csv", ".json"):
                headers["content-disposition"] = f'attachment; filename="{p.name}"'
            return FileResponse(p, headers=headers)
        return await self.guarded(go)

    async def raw(self, request: Request) -> Response:
        run_id, seq = request.path_params["run_id"], request.path_params["seq"]

        def go() -> Response:
            a = self.archives.get()
            row = data.row_of(a, run_id)
            got = data.raw_path(a, row, seq)
            if got is None:
                return PlainTextResponse("not found", status_code=404)
            p, rec = got
            return FileResponse(p, media_type="text/plain; charset=utf-8", headers={
                "content-disposition": f'attachment; filename="{_safe_filename(p.name)}"',
                "x-nicbench-sha256": str(rec.get("sha256") or "unknown")})
        return await self.guarded(go)

    async def events(self, request: Request) -> Response:
        """Server-sent events: a ``progress`` event whenever the run has a new
        point (read from the archive the run writes), ``end`` when it ends."""
        run_id = request.path_params["run_id"]

        def snap() -> dict[str, Any]:
            a = self.archives.get()
            return data.live(a, data.row_of(a, run_id), self.views, self.cache).to_dict()

        try:
            first = await run_in_threadpool(snap)
        except NicbenchError as e:
            return self.error(e)

        async def stream() -> AsyncIterator[str]:
            last = None
            cur = first
            quiet = 0.0
            while True:
                key = (cur["done"], cur["status"])
                if key != last:
                    yield f"event: progress\ndata: {json.dumps(cur)}\n\n"
                    last = key
                    quiet = 0.0
                if cur["status"] != "running":
                    yield "event: end\ndata: {}\n\n"
                    return
                await asyncio.sleep(LIVE_POLL_S)
                quiet += LIVE_POLL_S
                if quiet >= 15:
                    yield ": still running\n\n"       # keeps proxies and the browser from giving up
                    quiet = 0.0
                if await request.is_disconnected():
                    return
                try:
                    cur = await run_in_threadpool(snap)
                except NicbenchError as e:
                    yield f"event: failure\ndata: {json.dumps({'message': e.one_line()})}\n\n"
                    return

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    async def compare(self, request: Request) -> Response:
        ids = request.query_params.getlist("run")

        def go() -> Response:
            ctx = data.compare_context(self.archives.get(), ids, self.views, self.cache)
            return self.page("compare.html.j2", **ctx)
        return await self.guarded(go)

    async def abs(self, request: Request) -> Response:
        def go() -> Response:
            return self.page("abs.html.j2", **abpages.ab_list(self.archives.get()))
        return await self.guarded(go)

    async def ab(self, request: Request) -> Response:
        ab_id = request.path_params["ab_id"]

        def go() -> Response:
            return self.page("ab.html.j2", **abpages.ab_context(self.archives.get(), ab_id))
        return await self.guarded(go)

    async def trend(self, request: Request) -> Response:
        q = request.query_params

        def go() -> Response:
            a = self.archives.get()
            f = _filter(q)
            metric, point = q.get("metric") or None, q.get("point") or None
            choices = data.trend_choices(a, self.views, f.study, metric)
            ctx: dict[str, Any] = {}
            if metric and point:
                ctx = data.trend_context(a, self.views, metric, point, f, _int(q.get("window"), 10),
                                         _float(q.get("tolerance"), 0.0), _int(q.get("last"), 0) or None)
            return self.page("trend.html.j2", q=dict(q), choices=choices, t=ctx, filters=_FILTER_FIELDS)
        return await self.guarded(go)

    async def tag(self, request: Request) -> Response:
        """The one state change: tag a run.  Needs the token and a same-origin request."""
        run_id = request.path_params["run_id"]
        body = await request.body()
        if len(body) > 4096:
            return PlainTextResponse("request too large", status_code=413)
        # an urlencoded form of two short fields: the standard library's parser is all it needs
        try:
            fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
        except ValueError:
            return PlainTextResponse("too many fields", status_code=400)
        form = {k: v[0] for k, v in fields.items()}
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            return PlainTextResponse("cross-origin request refused", status_code=403)
        token = str(form.get("token") or request.headers.get("x-nicbench-token") or "")
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return PlainTextResponse("missing or wrong token", status_code=403)
        tag = str(form.get("tag") or "")
        if not NAME.match(tag):
            return PlainTextResponse("a tag is 1-64 letters, digits, '.', '_' or '-'", status_code=400)

        def go() -> Response:
            a = self.archives.get()
            row = data.row_of(a, run_id)
            a.add_tags(row.run_id, [tag])
            return RedirectResponse(f"/run/{row.run_id}", status_code=303)
        return await self.guarded(go)


def data_cache(loc: StoreLocation) -> Path:
    """Rendered reports: per archive, under the user's cache directory."""
    return cache_home() / "reports" / hashlib.sha256(loc.display.encode()).hexdigest()[:16]


_FILTER_FIELDS = ("study", "plan", "host", "kernel", "driver", "firmware", "tag", "status", "since", "until")


def _filter(q: Mapping[str, str]) -> RunFilter:
    g = {k: (q.get(k) or None) for k in _FILTER_FIELDS}
    return RunFilter(study=g["study"], name=g["plan"], host=g["host"], kernel=g["kernel"], driver=g["driver"],
                     firmware=g["firmware"], tag=g["tag"], status=g["status"], since=parse_when(g["since"], "since"),
                     until=parse_when(g["until"], "until"))


def _int(v: str | None, default: int) -> int:
    try:
        return int(v) if v else default
    except ValueError:
        return default


def _float(v: str | None, default: float) -> float:
    try:
        return float(v) if v else default
    except ValueError:
        return default


def _when(t: float | None) -> str:
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _num(v: Any, nd: int = 4) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{nd}g}"
    return str(v)


def _qs(q: Mapping[str, Any], **change: Any) -> str:
    merged = {**{k: v for k, v in q.items() if v not in (None, "")}, **change}
    return urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def _safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:100] or "raw.txt"


def create_app(loc: StoreLocation, *, token: str, allowed_hosts: Sequence[str],
               views: Mapping[str, StudyView] = VIEWS, cache_root: Path | None = None) -> Starlette:
    d = Dashboard(loc, token, views, cache_root)
    routes = [
        Route("/", d.runs),
        Route("/run/{run_id}", d.run),
        Route("/run/{run_id}/events", d.events),
        Route("/run/{run_id}/timeline", d.timeline),
        Route("/run/{run_id}/report/", d.report_file),
        Route("/run/{run_id}/report/{name}", d.report_file),
        Route("/run/{run_id}/raw/{seq:int}", d.raw),
        Route("/run/{run_id}/tag", d.tag, methods=["POST"]),
        Route("/compare", d.compare),
        Route("/trend", d.trend),
        Route("/ab", d.abs),
        Route("/ab/{ab_id}", d.ab),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[
        Middleware(SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
    ])

