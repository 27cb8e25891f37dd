// The official JavaScript client (npm `@kubernetes/client-node`) against keelson-apiserver,
// doing what its users do: create, get, list with a label selector and pages, watch and resume
// from a resourceVersion, 410 Gone for one older than the server's history, the four patch
// types, delete with each propagation policy (the controller manager's garbage collector
// running), and an informer's cache following adds, updates and deletes. The client has no
// leader election. Run by apiserver/tests/interop_js.rs with KUBECONFIG and KEELSON_JS_CLIENT
// (the install directory) set; prints "ok: ..." per check and exits 1 naming what differed.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const entry = join(process.env.KEELSON_JS_CLIENT, 'node_modules/@kubernetes/client-node/dist/index.js');
const k8s = await import(pathToFileURL(entry).href);

const NS = 'interop-js';
const ok = (what) => console.log(`ok: ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function assert(cond, what, got) {
  if (!cond) {
    throw new Error(`${what}: got ${JSON.stringify(got)}`);
  }
}

async function eventually(what, check, seconds = 30) {
  const end = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < end) {
    last = await check();
    if (last === true) return;
    await sleep(200);
  }
  throw new Error(`${what}: still ${JSON.stringify(last)} after ${seconds}s`);
}

function configMap(name, labels, owner) {
  const metadata = { name, labels };
  if (owner) {
    metadata.ownerReferences = [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.metadata.name, uid: owner.metadata.uid }];
  }
  return { metadata, data: { k: name } };
}

async function crudAndLists(core) {
  for (let i = 0; i < 5; i++) {
    await core.createNamespacedConfigMap({ namespace: NS, body: configMap(`cm-${i}`, { tier: i < 3 ? 'a' : 'b' }) });
  }
  const got = await core.readNamespacedConfigMap({ name: 'cm-1', namespace: NS });
  assert(got.data.k === 'cm-1' && got.metadata.labels.tier === 'a', 'create and get', got);
  ok('create and get');
  const selected = await core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'tier=a' });
  const names = selected.items.map((c) => c.metadata.name).sort();
  assert(names.join() === 'cm-0,cm-1,cm-2', 'list with a label selector', names);
  ok('list with a label selector');
  let token;
  const paged = [];
  let pages = 0;
  do {
    const page = await core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'tier', limit: 2, _continue: token });
    assert(page.items.length <= 2, 'a page of at most 2', page.items.length);
    paged.push(...page.items.map((c) => c.metadata.name));
    token = page.metadata._continue;
    pages++;
  } while (token);
  assert(pages === 3 && paged.sort().join() === 'cm-0,cm-1,cm-2,cm-3,cm-4', 'list in pages', { pages, paged });
  ok('list in pages of 2 with continue tokens');
}

// Events of a watch from `rv` until `until(event)` says stop (or 10 s): [phase, name, rv] each.
function watchUntil(kc, rv, until) {
  return new Promise(async (resolve, reject) => {
    const seen = [];
    const timer = setTimeout(() => { req?.abort(); resolve(seen); }, 10000);
    let req;
    const onEvent = (phase, obj) => {
      seen.push([phase, obj?.metadata?.name ?? obj?.code, obj?.metadata?.resourceVersion]);
      if (until(phase, obj)) {
        clearTimeout(timer);
        req?.abort();
        resolve(seen);
      }
    };
    const done = (err) => {
      clearTimeout(timer);
      if (err && err.name !== 'AbortError' && !String(err).includes('aborted')) seen.push(['DONE', String(err)]);
      resolve(seen);
    };
    try {
      req = await new k8s.Watch(kc).watch(`/api/v1/namespaces/${NS}/configmaps`, { resourceVersion: rv }, onEvent, done);
    } catch (e) {
      reject(e);
    }
  });
}

async function watches(kc, core) {
  const rv = (await core.listNamespacedConfigMap({ namespace: NS })).metadata.resourceVersion;
  const added = watchUntil(kc, rv, (_, obj) => obj?.metadata?.name === 'watched');
  await sleep(300);
  await core.createNamespacedConfigMap({ namespace: NS, body: configMap('watched') });
  const seen = await added;
  const last = seen[seen.length - 1];
  assert(last && last[0] === 'ADDED' && last[1] === 'watched', 'watch from a list sees ADDED', seen);
  ok("watch from a list's resourceVersion sees ADDED");
  // Resumed from that event: the change after it, nothing before.
  const resumed = watchUntil(kc, last[2], () => true);
  await core.patchNamespacedConfigMap({ name: 'watched', namespace: NS, body: { data: { k: 'changed' } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  const after = await resumed;
  assert(after.length === 1 && after[0][0] === 'MODIFIED' && after[0][1] === 'watched', 'watch resumed', after);
  ok("watch resumed from an event's resourceVersion");
  // The server keeps 100 events (--watch-cache-size): after 120 more writes the first
  // resourceVersion is gone, and a watch from it is told so with 410, as the client expects.
  for (let i = 0; i < 120; i++) {
    await core.patchNamespacedConfigMap({ name: 'watched', namespace: NS, body: { data: { n: String(i) } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  }
  const gone = await watchUntil(kc, rv, (phase) => phase === 'ERROR');
  assert(gone.length >= 1 && gone[0][0] === 'ERROR' && gone[0][1] === 410, 'a watch from an expired resourceVersion', gone);
  ok('watch from an expired resourceVersion gets ERROR 410');
}

async function patches(core) {
  const cases = [
    [k8s.PatchStrategy.MergePatch, { metadata: { labels: { merge: 'yes' } } }],
    [k8s.PatchStrategy.StrategicMergePatch, { data: { strategic: 'yes' } }],
    [k8s.PatchStrategy.JsonPatch, [{ op: 'add', path: '/data/json', value: 'yes' }]],
  ];
  for (const [type, body] of cases) {
    await core.patchNamespacedConfigMap({ name: 'cm-0', namespace: NS, body }, k8s.setHeaderOptions('Content-Type', type));
  }
  const applied = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm-0', namespace: NS }, data: { applied: 'yes' } };
  await core.patchNamespacedConfigMap({ name: 'cm-0', namespace: NS, body: applied, fieldManager: 'interop-js', force: true },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply));
  const got = await core.readNamespacedConfigMap({ name: 'cm-0', namespace: NS });
  assert(got.metadata.labels.merge === 'yes', 'merge patch', got.metadata.labels);
  for (const key of ['strategic', 'json', 'applied']) {
    assert(got.data[key] === 'yes', `${key} patch`, got.data);
  }
  ok('merge, strategic merge, JSON and apply patches');
}

async function deletes(core) {
  const gone = async (name) => {
    try {
      await core.readNamespacedConfigMap({ name, namespace: NS });
      return false;
    } catch (e) {
      return e.code === 404 ? true : e.code;
    }
  };
  for (const [policy, childStays] of [['Foreground', false], ['Background', false], ['Orphan', true]]) {
    const lower = policy.toLowerCase();
    const parent = await core.createNamespacedConfigMap({ namespace: NS, body: configMap(`parent-${lower}`) });
    const child = await core.createNamespacedConfigMap({ namespace: NS, body: configMap(`child-${lower}`, undefined, parent) });
    await core.deleteNamespacedConfigMap({ name: parent.metadata.name, namespace: NS, propagationPolicy: policy });
    await eventually(`${policy}: the parent gone`, () => gone(parent.metadata.name));
    if (childStays) {
      const left = await core.readNamespacedConfigMap({ name: child.metadata.name, namespace: NS });
      assert(!left.metadata.ownerReferences?.length, `${policy}: the dependent orphaned`, left.metadata);
    } else {
      await eventually(`${policy}: the dependent gone`, () => gone(child.metadata.name));
    }
    ok(`delete with propagationPolicy ${policy}`);
  }
}

async function informer(kc, core) {
  const list = () => core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'informed=yes' });
  const inf = k8s.makeInformer(kc, `/api/v1/namespaces/${NS}/configmaps`, list, 'informed=yes');
  const events = [];
  for (const kind of ['add', 'update', 'delete']) {
    inf.on(kind, (obj) => events.push(`${kind} ${obj.metadata.name}`));
  }
  // As its users do: start again after an error.
  inf.on('error', () => setTimeout(() => inf.start(), 500));
  await core.createNamespacedConfigMap({ namespace: NS, body: configMap('before', { informed: 'yes' }) });
  await inf.start();
  await core.createNamespacedConfigMap({ namespace: NS, body: configMap('after', { informed: 'yes' }) });
  await core.createNamespacedConfigMap({ namespace: NS, body: configMap('other', { informed: 'no' }) });
  await core.patchNamespacedConfigMap({ name: 'after', namespace: NS, body: { data: { k: 'v2' } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  await core.deleteNamespacedConfigMap({ name: 'before', namespace: NS });
  const want = ['add before', 'add after', 'update after', 'delete before'];
  await eventually('informer events', () => want.every((e) => events.includes(e)) || events);
  assert(!events.some((e) => e.endsWith(' other')), 'the informer\'s label selector', events);
  const cached = inf.list(NS).map((o) => o.metadata.name);
  assert(cached.join() === 'after' && inf.get('after', NS).data.k === 'v2', 'the informer\'s cache', cached);
  await inf.stop();
  ok('informer: list, then adds, updates and deletes through its watch, selector honoured');
}

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
try {
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await crudAndLists(core);
  await watches(kc, core);
  await patches(core);
  await deletes(core);
  await informer(kc, core);
  console.log('all checks passed');
  process.exit(0);
} catch (e) {
  console.error(`FAILED: ${e.stack || e}${e.body ? `\n${JSON.stringify(e.body)}` : ''}`);
  process.exit(1);
}
