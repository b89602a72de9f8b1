# Run in this folder: python3 summarize.py. Every run of ab/, then the
# medians per build. "send" is the harness's client send -> mock receive
# through the server (the server's work before the model request, p50),
# "after" the rest of the TTFT net of the mock's wait (the first token's
# way back, p50); both in ms.
import glob, json, re, statistics as st

def fields(md, store):
    for line in open(md):
        c = [x.strip() for x in line.split('|')]
        if len(c) > 7 and c[1] == store and c[2] == '200' and '/' in c[4] and c[6].count('/') == 1 and 'samples' not in line:
            try:
                send, total = float(c[4].split('/')[0]), float(c[6].split('/')[0])
            except ValueError:
                continue
            return send, total - send
    return None, None

rows = {'base': [], 'diag': []}
runs = sorted(glob.glob('ab/*.json'), key=lambda p: int(re.search(r'/(\d+)-', p).group(1)))
print('run build | added TTFT p50 over the relay: relay-redis memory redis | CPU ratio memory redis | send p50 relay relay-redis memory redis | after p50 relay relay-redis memory redis')
for f in runs:
    n, v = re.search(r'/(\d+)-(\w+)\.json', f).groups()
    d = json.load(open(f))
    r = d['relay']['ttft_minus_model_wait_p50_ms']
    added = {
        'relay-redis': d['relay_redis']['ttft_minus_model_wait_p50_ms'] - r,
        'memory': d['runtime']['memory']['ttft_minus_model_wait_p50_ms'] - r,
        'redis': d['runtime']['redis']['ttft_minus_model_wait_p50_ms'] - r,
    }
    cpu = (d['ratios']['memory']['cpu_per_turn'], d['ratios']['redis']['cpu_per_turn'])
    md = f.replace('.json', '.md')
    sa = {s: fields(md, s) for s in ('relay', 'relay-redis', 'memory', 'redis')}
    rows[v].append((added, cpu, sa))
    print(f"{n:>3} {v} | {added['relay-redis']:+.2f} {added['memory']:+.2f} {added['redis']:+.2f} | {cpu[0]:.2f} {cpu[1]:.2f} | "
          + ' '.join(f"{sa[s][0]:.2f}" for s in sa) + ' | ' + ' '.join(f"{sa[s][1]:.2f}" for s in sa))
print()
for v, rs in rows.items():
    med = lambda xs: st.median(xs)
    print(f"{v} ({len(rs)} runs): added TTFT median relay-redis {med([a['relay-redis'] for a,_,_ in rs]):+.2f}, memory {med([a['memory'] for a,_,_ in rs]):+.2f}, redis {med([a['redis'] for a,_,_ in rs]):+.2f}"
          f" (redis range {min(a['redis'] for a,_,_ in rs):+.2f}..{max(a['redis'] for a,_,_ in rs):+.2f}, over 1 ms in {sum(a['redis']>1 for a,_,_ in rs)})"
          f"; redis minus memory in the same run, median {med([a['redis']-a['memory'] for a,_,_ in rs]):+.2f}"
          f"; CPU ratio redis median {med([c[1] for _,c,_ in rs]):.2f}"
          f"; send redis {med([s['redis'][0] for _,_,s in rs]):.2f} memory {med([s['memory'][0] for _,_,s in rs]):.2f} relay-redis {med([s['relay-redis'][0] for _,_,s in rs]):.2f} relay {med([s['relay'][0] for _,_,s in rs]):.2f}"
          f"; after redis {med([s['redis'][1] for _,_,s in rs]):.2f} memory {med([s['memory'][1] for _,_,s in rs]):.2f} relay-redis {med([s['relay-redis'][1] for _,_,s in rs]):.2f} relay {med([s['relay'][1] for _,_,s in rs]):.2f}")
