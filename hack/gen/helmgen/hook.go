package main

import (
	"fmt"
	"strings"
)

// hookNames are the objects the uninstall hook removes: the manager's Deployment and the two
// webhook configurations, as the overlays name them.
type hookNames struct{ Deployment, Mutating, Validating string }

// readHookNames reads the names of one mode's rendering.
func readHookNames(objs []map[string]any) (hookNames, error) {
	var n hookNames
	deploy, _ := managerDeployment(objs)
	if deploy == nil {
		return n, fmt.Errorf("no Deployment with a container %q", managerContainer)
	}
	n.Deployment = str(deploy, "metadata", "name")
	for _, obj := range objs {
		switch str(obj, "kind") {
		case "MutatingWebhookConfiguration":
			n.Mutating = str(obj, "metadata", "name")
		case "ValidatingWebhookConfiguration":
			n.Validating = str(obj, "metadata", "name")
		}
	}
	return n, nil
}

// uninstallHook is templates/uninstall-hook.yaml: the pre-delete hook Job that runs the manager's
// uninstall subcommand (hack/uninstall.sh's steps 1-3), the least RBAC it needs, and a
// ValidatingAdmissionPolicy that narrows what RBAC cannot (its delete of ClusterObjectSets to those
// already being deleted, its patch to removing finalizers), as hook resources made before it
// (weight -10) and deleted when it succeeded or failed. Renderings without both webhook
// configurations get no hook (nil).
func uninstallHook(modes []ModeObjects) ([]byte, error) {
	var names hookNames
	for _, m := range modes {
		n, err := readHookNames(m.Objects)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Mode, err)
		}
		for _, f := range []struct{ seen, got *string }{{&names.Deployment, &n.Deployment}, {&names.Mutating, &n.Mutating}, {&names.Validating, &n.Validating}} {
			if *f.seen != "" && *f.got != "" && *f.seen != *f.got {
				return nil, fmt.Errorf("mode %s names the manager or a webhook configuration %q, an earlier mode %q", m.Mode, *f.got, *f.seen)
			}
			if *f.got != "" {
				*f.seen = *f.got
			}
		}
	}
	if names.Mutating == "" || names.Validating == "" {
		return nil, nil
	}
	r := strings.NewReplacer("DEPLOYMENT", hookName(names.Deployment), "MUTATING", hookName(names.Mutating),
		"VALIDATING", hookName(names.Validating), "HOOK", hookName(UninstallHookName))
	return []byte(r.Replace(hookTemplate())), nil
}

// hookHeader is the start of a hook object of the kind: its metadata (namespaced or not), hook
// weight and more annotations (lines of key: value).
func hookHeader(apiVersion, kind string, namespaced bool, weight string, annotations ...string) string {
	namespace := ""
	if namespaced {
		namespace = "\n  namespace: {{ .Release.Namespace }}"
	}
	more := ""
	for _, a := range annotations {
		more += "    " + a + "\n"
	}
	return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: HOOK%s\n  {{- include \"cos-externalizer.hookMetadata\" . }}\n    helm.sh/hook-weight: %q\n%s",
		apiVersion, kind, namespace, weight, more)
}

// hookBinding binds the hook's ClusterRole or Role (in the release's namespace) to its ServiceAccount.
func hookBinding(role string) string {
	return hookHeader(rbacV1, role+"Binding", role == "Role", "-10") + "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: " + role +
		"\n  name: HOOK\nsubjects:\n- kind: ServiceAccount\n  name: HOOK\n  namespace: {{ .Release.Namespace }}\n"
}

const rbacV1 = "rbac.authorization.k8s.io/v1"

// UninstallHookName names the hook's Job, ServiceAccount, roles and bindings.
const UninstallHookName = "cos-externalizer-uninstall"

// hookTemplate is the hook's template, with the names uninstallHook replaces.
func hookTemplate() string {
	return generatedHeader + "{{- if .Values.uninstallHook.enabled }}\n" + strings.Join([]string{
		hookHeader("v1", "ServiceAccount", true, "-10"),
		hookHeader(rbacV1, "ClusterRole", false, "-10") + clusterRules,
		hookBinding("ClusterRole"),
		hookHeader(rbacV1, "Role", true, "-10") + namespaceRules,
		hookBinding("Role"),
		hookHeader(admissionV1, "ValidatingAdmissionPolicy", false, "-10") + policySpec,
		hookHeader(admissionV1, "ValidatingAdmissionPolicyBinding", false, "-10") + policyBindingSpec,
		// Its pod's log is printed by helm when it fails, before the Job is deleted.
		hookHeader("batch/v1", "Job", true, "0", "helm.sh/hook-output-log-policy: hook-failed") + jobSpec,
	}, "---\n") + "{{- end }}\n"
}

const admissionV1 = "admissionregistration.k8s.io/v1"

// policySpec narrows the hook's ServiceAccount, whose RBAC allows delete and patch on every
// ClusterObjectSet (RBAC cannot say which): the uninstall subcommand deletes only ClusterObjectSets
// already being deleted (switching them to orphan deletion) and patches only to remove finalizers.
const policySpec = `spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [olm.operatorframework.io], apiVersions: ["*"], operations: [DELETE, UPDATE], resources: [clusterobjectsets]}
  matchConditions:
  - name: uninstall-hook
    expression: request.userInfo.username == 'system:serviceaccount:{{ .Release.Namespace }}:HOOK'
  validations:
  - expression: request.operation != 'DELETE' || has(oldObject.metadata.deletionTimestamp)
    message: the uninstall hook may delete only ClusterObjectSets already being deleted
    reason: Forbidden
  - expression: >-
      request.operation != 'UPDATE' || (object.spec == oldObject.spec
      && (has(object.metadata.labels) ? object.metadata.labels : {}) == (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})
      && (has(object.metadata.annotations) ? object.metadata.annotations : {}) == (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})
      && (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) == (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : [])
      && (!has(object.metadata.finalizers) || object.metadata.finalizers.all(f, has(oldObject.metadata.finalizers) && f in oldObject.metadata.finalizers)))
    message: the uninstall hook may only remove finalizers of ClusterObjectSets
    reason: Forbidden
`

const policyBindingSpec = `spec:
  policyName: HOOK
  validationActions: [Deny]
`

const clusterRules = `rules:
- {apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations], resourceNames: [MUTATING], verbs: [get, delete]}
- {apiGroups: [admissionregistration.k8s.io], resources: [validatingwebhookconfigurations], resourceNames: [VALIDATING], verbs: [get, delete]}
- {apiGroups: [olm.operatorframework.io], resources: [clusterobjectsets], verbs: [get, list, patch, delete]}
`

const namespaceRules = `rules:
- {apiGroups: [apps], resources: [deployments], resourceNames: [DEPLOYMENT], verbs: [get, delete]}
- {apiGroups: [""], resources: [pods], verbs: [list, watch]}
`

const jobSpec = `spec:
  backoffLimit: 3
  activeDeadlineSeconds: 600
  template:
    metadata:
      labels:
        app.kubernetes.io/component: uninstall
        app.kubernetes.io/name: {{ include "cos-externalizer.name" . }}
    spec:
      serviceAccountName: HOOK
      restartPolicy: Never
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: uninstall
        image: {{ include "cos-externalizer.image" . }}
        {{- with .Values.image.pullPolicy }}
        imagePullPolicy: {{ . }}
        {{- end }}
        args:
        - uninstall
        - --namespace={{ .Release.Namespace }}
        - --deployment=DEPLOYMENT
        - --mutating-webhook=MUTATING
        - --validating-webhook=VALIDATING
        resources:
          limits:
            memory: 256Mi
          requests:
            cpu: 10m
            memory: 64Mi
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop:
            - ALL
          readOnlyRootFilesystem: true
`
