const [url, ...inputs] = process.argv.slice(2)
const ws = new WebSocket(url)
ws.binaryType = "arraybuffer"
const out = []
ws.onopen = () => { out.push({ev:"open"}); for (const i of inputs) ws.send(i) }
ws.onmessage = (e) => {
  if (e.data instanceof ArrayBuffer) { const b = new Uint8Array(e.data); out.push({binary: Array.from(b.slice(0,1)), rest: new TextDecoder().decode(b.subarray(1))}) }
  else out.push({text: e.data})
}
ws.onerror = (e) => out.push({ev:"error", msg: String(e.message||e)})
ws.onclose = (e) => { out.push({ev:"close", code:e.code, reason:e.reason}); console.log(JSON.stringify(out,null,1)); process.exit(0) }
setTimeout(() => { console.log(JSON.stringify(out,null,1)); process.exit(0) }, Number(process.env.WAIT||1500))
