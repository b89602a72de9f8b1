import json,statistics as st,glob,re
rows={}
for f in sorted(glob.glob('./ab*-*-*.json')):
    m=re.match(r'.*/(ab\d?)-(\w+)-(\d+)\.json',f); batch,v,i=m.group(1),m.group(2),int(m.group(3))
    d=json.load(open(f)); r=d['ratios']
    rows[(batch,v,i)]=dict(relay=d['relay']['ttft_minus_model_wait_p50_ms'],mem=r['memory']['added_ttft_p50_ms'],memcpu=r['memory']['cpu_per_turn'],red=r['redis']['added_ttft_p50_ms'],redcpu=r['redis']['cpu_per_turn'])
for k in sorted(rows): print(k, ' '.join(f'{n}={x:.2f}' for n,x in rows[k].items()))
for v in ['before','stack','after']:
    xs=[x for k,x in rows.items() if k[1]==v]
    print(v,len(xs),' '.join(f'{n}: med {st.median(x[n] for x in xs):.2f} range {min(x[n] for x in xs):.2f}..{max(x[n] for x in xs):.2f} over1 {sum(1 for x in xs if x[n]>1) if n in ("mem","red") else ""}' for n in ['mem','memcpu','red','redcpu']))
def paired(a,b):
    ds={n:[] for n in ['mem','memcpu','red','redcpu']}
    for (batch,v,i),x in rows.items():
        if v==b and (batch,a,i) in rows:
            for n in ds: ds[n].append(x[n]-rows[(batch,a,i)][n])
    print(f'{b} - {a}: pairs {len(ds["mem"])}',' '.join(f'{n} {st.median(d):+.2f} ({min(d):+.2f}..{max(d):+.2f})' for n,d in ds.items()))
paired('before','after'); paired('before','stack'); paired('stack','after')
