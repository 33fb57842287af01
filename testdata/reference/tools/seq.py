import json,sys
def events(path):
    for line in open(path):
        if line.startswith('data: '):
            yield json.loads(line[6:])
def desc(e):
    t=e.get('type'); p=e.get('properties') or e.get('data') or {}
    if 'payload' in e: return desc(e['payload'])
    if t=='sync': return 'sync('+e['syncEvent']['type']+')'
    if t=='message.part.updated':
        pt=p['part']; s=pt['type']
        if s=='tool': s+='/'+pt['tool']+'/'+pt['state']['status']
        return t+'['+s+']'
    if t=='message.part.delta': return t+'['+p.get('field','')+']'
    if t=='message.updated':
        i=p['info']; return t+'['+i['role']+(' fin='+str(i.get('finish')) if i['role']=='assistant' else '')+(' done' if i['time'].get('completed') else '')+']'
    if t=='session.status': return t+'['+p['status']['type']+']'
    return t
out=[]
for e in events(sys.argv[1]):
    d=desc(e)
    if d.startswith('plugin.added'): d='plugin.added'
    if out and out[-1][0]==d: out[-1][1]+=1
    else: out.append([d,1])
print(' → '.join(d+('×%d'%n if n>1 else '') for d,n in out))
