#!/usr/bin/env bash
# Turns a leaf cluster's fleetscope service account into the labelled cluster Secret that
# fleetscope reads on the management cluster (label fleetscope.io/cluster=true, key kubeconfig),
# as Kiali's remote-cluster preparation script does. Prints the Secret's YAML on stdout (or
# applies it with --apply); the token is never printed anywhere else.
#
#   scripts/make-cluster-secret.sh --leaf-context prod-eu-1 --setup-leaf \
#     | kubectl --context management apply -f -
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: make-cluster-secret.sh --leaf-context CTX [options]

  --leaf-context CTX        kubeconfig context of the leaf cluster (default: current context)
  --leaf-kubeconfig FILE    kubeconfig holding that context (default: kubectl's default)
  --cluster-name NAME       fleetscope's name for the cluster (default: the context's name);
                            lower-case letters, digits, '.', '-', '_', at most 63 characters
  --server URL              the leaf API server as the management cluster reaches it
                            (default: the context's server)
  --leaf-namespace NS       namespace of the service account on the leaf (default: fleetscope)
  --service-account NAME    the service account (default: fleetscope-collector)
  --token-secret NAME       its token Secret (default: <service-account>-token)
  --namespace NS            fleetscope's namespace on the management cluster (default: fleetscope)
  --setup-leaf              first apply k8s/leaf to the leaf cluster (kubectl apply -k)
  --apply                   apply the Secret to the management cluster instead of printing it
  --management-context CTX  context of the management cluster for --apply (default: current)
  --wait-s N                seconds to wait for the token to be issued (default: 60)
USAGE
}

die() { echo "make-cluster-secret: $*" >&2; exit 1; }

LEAF_CONTEXT="" LEAF_KUBECONFIG="" CLUSTER_NAME="" SERVER="" LEAF_NS="fleetscope"
SA="fleetscope-collector" TOKEN_SECRET="" NS="fleetscope" SETUP=0 APPLY=0 MGMT_CONTEXT=""
WAIT_S=60
while [ $# -gt 0 ]; do
  case "$1" in
    --leaf-context) LEAF_CONTEXT=${2:?}; shift ;;
    --leaf-kubeconfig) LEAF_KUBECONFIG=${2:?}; shift ;;
    --cluster-name) CLUSTER_NAME=${2:?}; shift ;;
    --server) SERVER=${2:?}; shift ;;
    --leaf-namespace) LEAF_NS=${2:?}; shift ;;
    --service-account) SA=${2:?}; shift ;;
    --token-secret) TOKEN_SECRET=${2:?}; shift ;;
    --namespace) NS=${2:?}; shift ;;
    --setup-leaf) SETUP=1 ;;
    --apply) APPLY=1 ;;
    --management-context) MGMT_CONTEXT=${2:?}; shift ;;
    --wait-s) WAIT_S=${2:?}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done
TOKEN_SECRET=${TOKEN_SECRET:-$SA-token}
command -v kubectl >/dev/null || die "kubectl is not on PATH"

leaf() {
  kubectl ${LEAF_KUBECONFIG:+--kubeconfig "$LEAF_KUBECONFIG"} \
    ${LEAF_CONTEXT:+--context "$LEAF_CONTEXT"} "$@"
}

if [ -z "$CLUSTER_NAME" ]; then
  CLUSTER_NAME=${LEAF_CONTEXT:-$(leaf config current-context)}
fi
# The name becomes a Redis hash tag, a URL segment and a label value: keep it plain.
[[ "$CLUSTER_NAME" =~ ^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$ ]] ||
  die "'$CLUSTER_NAME' is not a valid cluster name (lower-case letters, digits, '.-_'; at most 63); pass --cluster-name"

if [ "$SETUP" = 1 ]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  leaf apply -k "$root/k8s/leaf" >&2
fi

if [ -z "$SERVER" ]; then
  SERVER=$(leaf config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
  [ -n "$SERVER" ] || die "no server in the leaf context; pass --server"
fi

# The token controller fills the Secret shortly after it is created: poll for it.
token_b64="" deadline=$((SECONDS + WAIT_S))
while :; do
  token_b64=$(leaf -n "$LEAF_NS" get secret "$TOKEN_SECRET" -o 'jsonpath={.data.token}' \
    2>/dev/null) || true
  [ -n "$token_b64" ] && break
  [ $SECONDS -lt $deadline ] ||
    die "Secret $LEAF_NS/$TOKEN_SECRET has no token after ${WAIT_S}s (apply k8s/leaf first, or --setup-leaf)"
  sleep 1
done
ca_b64=$(leaf -n "$LEAF_NS" get secret "$TOKEN_SECRET" -o 'jsonpath={.data.ca\.crt}')
if [ -z "$ca_b64" ]; then
  ca_b64=$(leaf config view --minify --raw -o \
    'jsonpath={.clusters[0].cluster.certificate-authority-data}')
fi
token=$(printf '%s' "$token_b64" | base64 --decode)

kubeconfig() {
  cat <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: $CLUSTER_NAME
    cluster:
      server: $SERVER
${ca_b64:+      certificate-authority-data: $ca_b64}
users:
  - name: $SA
    user:
      token: $token
contexts:
  - name: $CLUSTER_NAME
    context:
      cluster: $CLUSTER_NAME
      user: $SA
current-context: $CLUSTER_NAME
KUBECONFIG
}

secret() {
  cat <<SECRET
apiVersion: v1
kind: Secret
metadata:
  name: fleetscope-cluster-${CLUSTER_NAME//_/-}
  namespace: $NS
  labels:
    fleetscope.io/cluster: "true"
    fleetscope.io/cluster-name: $CLUSTER_NAME
type: Opaque
data:
  kubeconfig: $(kubeconfig | sed '/^$/d' | base64 | tr -d '\n')
SECRET
}

if [ "$APPLY" = 1 ]; then
  secret | kubectl ${MGMT_CONTEXT:+--context "$MGMT_CONTEXT"} apply -f -
else
  secret
fi
echo "make-cluster-secret: cluster '$CLUSTER_NAME' ($SERVER) as $LEAF_NS/$SA" >&2
