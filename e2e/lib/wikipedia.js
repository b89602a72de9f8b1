// A local fake of Wikipedia's search (the MediaWiki Action API's
// list=search, as the server's search tool calls it), the counterpart of
// tools/search/searchtest: startServer points WIKIPEDIA_URL at it, so that
// no test reaches the network while the search works as `make run` has it.
import { createServer } from 'node:http';

/** pages are the fake's articles: one for each suggested prompt of the shipped agents. */
export const pages = [
  ['Transatlantic telegraph cable', "The first transatlantic telegraph cable was laid in 1858 across the floor of the Atlantic Ocean from Valentia Island in western Ireland to Heart's Content in eastern Newfoundland; it worked for three weeks."],
  ['Great Wall of China', 'The Great Wall of China is a series of fortifications in northern China. Contrary to a popular claim, it is not visible to the naked eye from the Moon.'],
  ['Heat pump', 'A heat pump moves heat from a colder place to a warmer one. Cold climate heat pumps keep working well below freezing, at a lower efficiency.'],
  ['Corporate retreat', 'A corporate retreat, or offsite, takes a team away from its workplace for one or more days of planning, training and team building.'],
  ['Remote work', "Remote work is work done away from an employer's premises. Studies of its effect on productivity disagree, depending on the task and how it is measured."],
].map(([title, text]) => ({ title, text }));

const stop = new Set(['the', 'and', 'for', 'was', 'when', 'what', 'how', 'who', 'are', 'with', 'from', 'does', 'this', 'that']);
const words = (s) => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
const escape = (s) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

function search(query) {
  const q = [...new Set(words(query).filter((w) => [...w].length >= 3 && !stop.has(w)))];
  return pages
    .map((p, i) => ({ p, i, score: q.filter((w) => words(`${p.title} ${p.text}`).includes(w)).length }))
    .filter((h) => h.score > 0)
    .sort((a, b) => b.score - a.score || a.i - b.i)
    .map(({ p, i }) => ({
      ns: 0,
      title: p.title,
      pageid: 1000 + i,
      snippet: p.text.split(/([\p{L}\p{N}]+)/u).map((part) => (q.includes(part.toLowerCase()) ? `<span class="searchmatch">${escape(part)}</span>` : escape(part))).join(''),
    }));
}

/** startWikipedia starts the fake on a free loopback port: {url, requests, close()}. It never keeps node running. */
export function startWikipedia() {
  const requests = [];
  const server = createServer((req, res) => {
    const u = new URL(req.url, 'http://fake');
    const json = (body) => { res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }); res.end(JSON.stringify(body)); };
    if (u.pathname !== '/w/api.php') { res.writeHead(404); res.end(); return; }
    const p = u.searchParams;
    requests.push({ query: p.get('srsearch'), limit: p.get('srlimit'), userAgent: req.headers['user-agent'] });
    if (p.get('action') !== 'query' || p.get('list') !== 'search' || p.get('format') !== 'json' || !p.get('srsearch')) {
      json({ error: { code: 'badvalue', info: 'The fake answers action=query&list=search&format=json with srsearch only.' } });
      return;
    }
    const hits = search(p.get('srsearch'));
    json({ batchcomplete: true, query: { searchinfo: { totalhits: hits.length }, search: hits.slice(0, Number(p.get('srlimit')) || 10) } });
  });
  server.unref();
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok({
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((r) => server.close(r)),
  })));
}
