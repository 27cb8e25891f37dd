# Ruby's kubeclient (Debian `ruby-kubeclient`) against keelson-apiserver, doing what its users
# do: create, get, list with a label selector and pages, watch (kubeclient's /watch/ paths) and
# resume from a resourceVersion, 410 Gone for one older than the server's history, the four patch
# types, delete with each propagation policy (the controller manager's garbage collector
# running), update with a stale resourceVersion refused. The client has no informer or leader
# election in this release. Run by apiserver/tests/interop_ruby.rs with KUBECONFIG set; prints
# "ok: ..." per check and exits 1 naming what differed.

require 'kubeclient'

NS = 'interop-rb'.freeze

def ok(what)
  puts "ok: #{what}"
  $stdout.flush
end

def check(cond, what, got)
  raise "#{what}: got #{got.inspect}" unless cond
end

def eventually(what, seconds = 30)
  deadline = Time.now + seconds
  last = nil
  while Time.now < deadline
    last = yield
    return if last == true
    sleep 0.2
  end
  raise "#{what}: still #{last.inspect} after #{seconds}s"
end

def config_map(name, labels: nil, owner: nil)
  meta = { name: name, namespace: NS }
  meta[:labels] = labels if labels
  if owner
    meta[:ownerReferences] = [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.metadata.name, uid: owner.metadata.uid }]
  end
  Kubeclient::Resource.new(metadata: meta, data: { k: name })
end

def crud_and_lists(core)
  5.times { |i| core.create_config_map(config_map("cm-#{i}", labels: { tier: i < 3 ? 'a' : 'b' })) }
  got = core.get_config_map('cm-1', NS)
  check(got.data.k == 'cm-1' && got.metadata.labels.tier == 'a', 'create and get', got.to_h)
  ok 'create and get'
  names = core.get_config_maps(namespace: NS, label_selector: 'tier=a').map { |c| c.metadata.name }.sort
  check(names == %w[cm-0 cm-1 cm-2], 'list with a label selector', names)
  ok 'list with a label selector'
  paged = []
  token = nil
  pages = 0
  loop do
    page = core.get_config_maps(namespace: NS, label_selector: 'tier', limit: 2, continue: token)
    check(page.size <= 2, 'a page of at most 2', page.size)
    paged.concat(page.map { |c| c.metadata.name })
    pages += 1
    break if page.last?
    token = page.continue
  end
  check(pages == 3 && paged.sort == (0..4).map { |i| "cm-#{i}" }, 'list in pages', [pages, paged])
  ok 'list in pages of 2 with continue tokens'
end

# The notices of a watch from `rv` until the block says stop (or `seconds`): [type, name or code, rv].
def watch_until(core, rv, seconds = 10)
  seen = []
  watcher = core.watch_config_maps(namespace: NS, resource_version: rv)
  timer = Thread.new { sleep seconds; watcher.finish }
  watcher.each do |notice|
    obj = notice.object
    seen << [notice.type, notice.type == 'ERROR' ? obj.code : obj.metadata.name,
             notice.type == 'ERROR' ? nil : obj.metadata.resourceVersion]
    if yield(notice)
      watcher.finish
      break
    end
  end
  timer.kill
  seen
end

def watches(core)
  rv = core.get_config_maps(namespace: NS).resourceVersion
  added = Thread.new { watch_until(core, rv) { |n| n.object.metadata&.name == 'watched' } }
  sleep 0.3
  core.create_config_map(config_map('watched'))
  seen = added.value
  check(seen.last && seen.last[0..1] == %w[ADDED watched], 'watch from a list sees ADDED', seen)
  ok "watch from a list's resourceVersion sees ADDED"
  resumed = Thread.new { watch_until(core, seen.last[2]) { true } }
  sleep 0.3
  core.merge_patch_config_map('watched', { data: { k: 'changed' } }, NS)
  after = resumed.value
  check(after.map { |e| e[0..1] } == [%w[MODIFIED watched]], 'watch resumed', after)
  ok "watch resumed from an event's resourceVersion"
  # The server keeps 100 events (--watch-cache-size): after 120 more writes the first
  # resourceVersion is gone, and a watch from it gets an ERROR notice with code 410.
  120.times { |i| core.merge_patch_config_map('watched', { data: { n: i.to_s } }, NS) }
  gone = watch_until(core, rv) { |n| n.type == 'ERROR' }
  check(gone.first && gone.first[0..1] == ['ERROR', 410], 'a watch from an expired resourceVersion', gone)
  ok 'watch from an expired resourceVersion gets ERROR 410'
end

def patches(core)
  core.merge_patch_config_map('cm-0', { metadata: { labels: { merge: 'yes' } } }, NS)
  core.patch_config_map('cm-0', { data: { strategic: 'yes' } }, NS)
  core.json_patch_config_map('cm-0', [{ op: 'add', path: '/data/json', value: 'yes' }], NS)
  # A Hash: this release's Resource#to_json is the object's inspect string, not its JSON.
  applied = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm-0', namespace: NS }, data: { applied: 'yes' } }
  core.apply_config_map(applied, field_manager: 'interop-rb', force: true)
  got = core.get_config_map('cm-0', NS)
  check(got.metadata.labels.merge == 'yes', 'merge patch', got.metadata.labels.to_h)
  %w[strategic json applied].each { |key| check(got.data[key] == 'yes', "#{key} patch", got.data.to_h) }
  ok 'merge, strategic merge, JSON and apply patches'
  stale = core.get_config_map('cm-1', NS)
  core.merge_patch_config_map('cm-1', { data: { k: 'newer' } }, NS)
  stale.data.k = 'older'
  begin
    core.update_config_map(stale)
    raise 'an update with a stale resourceVersion was accepted'
  rescue Kubeclient::HttpError => e
    check(e.error_code == 409, 'update with a stale resourceVersion', [e.error_code, e.message])
  end
  ok 'update with a stale resourceVersion gets 409 Conflict'
end

def gone?(core, name)
  core.get_config_map(name, NS)
  false
rescue Kubeclient::ResourceNotFoundError
  true
end

def deletes(core)
  [['Foreground', false], ['Background', false], ['Orphan', true]].each do |policy, child_stays|
    parent = core.create_config_map(config_map("parent-#{policy.downcase}"))
    child = core.create_config_map(config_map("child-#{policy.downcase}", owner: parent))
    core.delete_config_map(parent.metadata.name, NS, delete_options: { propagationPolicy: policy })
    eventually("#{policy}: the parent gone") { gone?(core, parent.metadata.name) }
    if child_stays
      left = core.get_config_map(child.metadata.name, NS)
      check((left.metadata.ownerReferences || []).empty?, "#{policy}: the dependent orphaned", left.metadata.to_h)
    else
      eventually("#{policy}: the dependent gone") { gone?(core, child.metadata.name) }
    end
    ok "delete with propagationPolicy #{policy}"
  end
end

begin
  context = Kubeclient::Config.read(ENV.fetch('KUBECONFIG')).context
  core = Kubeclient::Client.new(context.api_endpoint + '/api', 'v1',
                                ssl_options: context.ssl_options, auth_options: context.auth_options)
  core.create_namespace(Kubeclient::Resource.new(metadata: { name: NS }))
  crud_and_lists(core)
  watches(core)
  patches(core)
  deletes(core)
  puts 'all checks passed'
rescue StandardError => e
  warn "FAILED: #{e.class}: #{e.message}\n#{e.backtrace.first(5).join("\n")}"
  exit 1
end
