"""An agent whose kubeconfig user is an ``exec`` plugin keeps working when its token expires and changes.

Managed clusters hand out short-lived tokens through exec plugins.  Here the plugin prints a
ServiceAccount token read from a file, valid for a few seconds by its ``expirationTimestamp``.  Mid-run
the file switches to a second ServiceAccount's token and the first ServiceAccount is deleted (its
token is refused from then on): the agent's lease renewals must carry on with the new token, and its
graceful exit (deleting its nodes) must use it too.  Real control plane, real agent process.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from waiting import wait_until

from hollow.process import start_agent
from kubecore.config import client_configuration, load_endpoint

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).parent.parent / ".artifacts"
PLUGIN = """\
import datetime, json, sys
token = open(sys.argv[1]).read().strip()
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": token, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


def _service_account_token(api: client.ApiClient, name: str) -> str:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account("default", {"metadata": {"name": name}})
    client.RbacAuthorizationV1Api(api).create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]})
    req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    return str(core.create_namespaced_service_account_token(name, "default", req).status.token)


def test_agent_follows_an_expiring_exec_token(cluster: Any, tmp_path: Path) -> None:
    prefix = f"htk{uuid.uuid4().hex[:5]}"
    api = client.ApiClient(client_configuration(str(cluster.kubeconfig)))
    core = client.CoreV1Api(api)
    admin = load_endpoint(cluster.kubeconfig)
    names = [f"{prefix}-a", f"{prefix}-b"]
    tokens = [_service_account_token(api, n) for n in names]
    token_file = tmp_path / "token"
    token_file.write_text(tokens[0])
    (tmp_path / "plugin.py").write_text(PLUGIN)
    # the cluster's CA file (the agent is another process: the admin endpoint's embedded CA is in memory)
    cluster_entry: dict[str, Any] = {"server": admin.server, "certificate-authority": str(cluster.ca_file)}
    kubeconfig = tmp_path / "exec-kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "exec",
        "clusters": [{"name": "c", "cluster": cluster_entry}],
        "users": [{"name": "plugin", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
            "args": [str(tmp_path / "plugin.py"), str(token_file)], "interactiveMode": "Never"}}}],
        "contexts": [{"name": "exec", "context": {"cluster": "c", "user": "plugin"}}]}))
    pool = f"{prefix}-tok"
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump({"pools": [{
        "name": pool, "count": 3, "resources": {"cpu": "8", "memory": "32Gi"},
        "taints": [{"key": "hollowscale.io/test", "value": prefix, "effect": "NoSchedule"}]}]}))
    coord = client.CoordinationV1Api(api)

    def renewed_since(t: float) -> bool:
        leases = [x for x in coord.list_namespaced_lease("kube-node-lease").items
                  if x.metadata.name.startswith(pool + "-")]
        return len(leases) == 3 and all(x.spec.renew_time.timestamp() > t for x in leases)

    # lease 10 s, renewals every 2.5 s: well inside the test's patience after the switch
    agent = start_agent(kubeconfig, pools, ARTIFACTS / f"hollow-{prefix}" / "agent.log", "--delete-nodes-on-exit",
                        "--heartbeat-factor", "0.25", timeout_s=60)
    try:
        agent.wait_healthy(60)
        wait_until("renewals with the first token", lambda: renewed_since(time.time() - 5), 30)
        token_file.write_text(tokens[1])
        core.delete_namespaced_service_account(names[0], "default")
        client.RbacAuthorizationV1Api(api).delete_cluster_role_binding(names[0])
        switched = time.time()
        # the old token is refused at once; the plugin's token expires within 3 s and the agent
        # looks at it again within 10 s: renewals resume with the new token
        wait_until("renewals with the second token", lambda: renewed_since(switched + 12), 40, every=1.0)
        nodes = core.list_node(label_selector=f"hollowscale.io/pool={pool}").items
        assert len(nodes) == 3 and all(
            any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) for n in nodes)
        metrics = agent.metrics()
        assert metrics.get('hollow_api_requests_total{code="200",verb="update_lease"}', 0) > 0
    finally:
        code = agent.stop(timeout_s=60)
        for name in names[1:]:
            core.delete_namespaced_service_account(name, "default")
            client.RbacAuthorizationV1Api(api).delete_cluster_role_binding(name)
    assert code == 0
    assert core.list_node(label_selector=f"hollowscale.io/pool={pool}").items == []  # deleted with the new token
