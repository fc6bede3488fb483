//! Pod templates, Pod specs and what they hold (containers, probes, security contexts, volumes), from protobuf
//! to the JSON form.

use super::*;

pub(super) fn pod_template(t: &core::PodTemplateSpec) -> Value {
    Obj::new().msg("metadata", &t.metadata, object_meta).msg("spec", &t.spec, pod_spec).done()
}

pub(super) fn pod_spec(s: &core::PodSpec) -> Value {
    Obj::new()
        .list("volumes", &s.volumes, volume)
        .list("initContainers", &s.init_containers, container)
        .list("containers", &s.containers, container)
        .str("restartPolicy", &s.restart_policy)
        .int("terminationGracePeriodSeconds", &s.termination_grace_period_seconds)
        .int("activeDeadlineSeconds", &s.active_deadline_seconds)
        .str("dnsPolicy", &s.dns_policy)
        .map("nodeSelector", &s.node_selector)
        .str("serviceAccountName", &s.service_account_name)
        .str("serviceAccount", &s.service_account)
        .bool("automountServiceAccountToken", &s.automount_service_account_token)
        .str("nodeName", &s.node_name)
        .bool0("hostNetwork", &s.host_network)
        .bool0("hostPID", &s.host_pid)
        .bool0("hostIPC", &s.host_ipc)
        .bool("shareProcessNamespace", &s.share_process_namespace)
        .msg("securityContext", &s.security_context, pod_security_context)
        .list("imagePullSecrets", &s.image_pull_secrets, local_ref)
        .str("hostname", &s.hostname)
        .str("subdomain", &s.subdomain)
        .str("schedulerName", &s.scheduler_name)
        .list("tolerations", &s.tolerations, |t| {
            Obj::new()
                .str("key", &t.key)
                .str("operator", &t.operator)
                .str("value", &t.value)
                .str("effect", &t.effect)
                .int("tolerationSeconds", &t.toleration_seconds)
                .done()
        })
        .list("hostAliases", &s.host_aliases, |h| Obj::new().str("ip", &h.ip).strs("hostnames", &h.hostnames).done())
        .str("priorityClassName", &s.priority_class_name)
        .int("priority", &s.priority)
        .list("readinessGates", &s.readiness_gates, |g| Obj::new().str("conditionType", &g.condition_type).done())
        .str("runtimeClassName", &s.runtime_class_name)
        .bool("enableServiceLinks", &s.enable_service_links)
        .str("preemptionPolicy", &s.preemption_policy)
        .bool("setHostnameAsFQDN", &s.set_hostname_as_fqdn)
        .msg("os", &s.os, |o| Obj::new().str("name", &o.name).done())
        .bool("hostUsers", &s.host_users)
        .done()
}

pub(super) fn container(c: &core::Container) -> Value {
    Obj::new()
        .str("name", &c.name)
        .str("image", &c.image)
        .strs("command", &c.command)
        .strs("args", &c.args)
        .str("workingDir", &c.working_dir)
        .list("ports", &c.ports, |p| {
            Obj::new()
                .str("name", &p.name)
                .int0("hostPort", &p.host_port)
                .int("containerPort", &p.container_port)
                .str("protocol", &p.protocol)
                .str("hostIP", &p.host_ip)
                .done()
        })
        .list("envFrom", &c.env_from, |e| {
            Obj::new()
                .str("prefix", &e.prefix)
                .msg("configMapRef", &e.config_map_ref, |r| {
                    named_optional(&r.local_object_reference, &r.optional).done()
                })
                .msg("secretRef", &e.secret_ref, |r| named_optional(&r.local_object_reference, &r.optional).done())
                .done()
        })
        .list("env", &c.env, |e| {
            Obj::new().str("name", &e.name).str("value", &e.value).msg("valueFrom", &e.value_from, env_source).done()
        })
        .msg("resources", &c.resources, |r| {
            Obj::new()
                .quantities("limits", &r.limits)
                .quantities("requests", &r.requests)
                .list("claims", &r.claims, |cl| Obj::new().str("name", &cl.name).str("request", &cl.request).done())
                .done()
        })
        .str("restartPolicy", &c.restart_policy)
        .list("volumeMounts", &c.volume_mounts, |m| {
            Obj::new()
                .str("name", &m.name)
                .bool0("readOnly", &m.read_only)
                .str("recursiveReadOnly", &m.recursive_read_only)
                .str("mountPath", &m.mount_path)
                .str("subPath", &m.sub_path)
                .str("mountPropagation", &m.mount_propagation)
                .str("subPathExpr", &m.sub_path_expr)
                .done()
        })
        .msg("livenessProbe", &c.liveness_probe, probe)
        .msg("readinessProbe", &c.readiness_probe, probe)
        .msg("startupProbe", &c.startup_probe, probe)
        .msg("lifecycle", &c.lifecycle, |l| {
            Obj::new()
                .msg("postStart", &l.post_start, lifecycle_handler)
                .msg("preStop", &l.pre_stop, lifecycle_handler)
                .str("stopSignal", &l.stop_signal)
                .done()
        })
        .str("terminationMessagePath", &c.termination_message_path)
        .str("terminationMessagePolicy", &c.termination_message_policy)
        .str("imagePullPolicy", &c.image_pull_policy)
        .msg("securityContext", &c.security_context, security_context)
        .bool0("stdin", &c.stdin)
        .bool0("stdinOnce", &c.stdin_once)
        .bool0("tty", &c.tty)
        .done()
}

pub(super) fn named_optional(r: &Option<core::LocalObjectReference>, optional: &Option<bool>) -> Obj {
    Obj::new().str("name", &r.as_ref().and_then(|r| r.name.clone())).bool("optional", optional)
}

pub(super) fn env_source(s: &core::EnvVarSource) -> Value {
    Obj::new()
        .msg("fieldRef", &s.field_ref, object_field_selector)
        .msg("resourceFieldRef", &s.resource_field_ref, resource_field_selector)
        .msg("configMapKeyRef", &s.config_map_key_ref, |r| {
            named_optional(&r.local_object_reference, &r.optional).str("key", &r.key).done()
        })
        .msg("secretKeyRef", &s.secret_key_ref, |r| {
            named_optional(&r.local_object_reference, &r.optional).str("key", &r.key).done()
        })
        .done()
}

pub(super) fn object_field_selector(f: &core::ObjectFieldSelector) -> Value {
    Obj::new().str("apiVersion", &f.api_version).str("fieldPath", &f.field_path).done()
}

pub(super) fn resource_field_selector(r: &core::ResourceFieldSelector) -> Value {
    Obj::new()
        .str("containerName", &r.container_name)
        .str("resource", &r.resource)
        .msg("divisor", &r.divisor, quantity)
        .done()
}

pub(super) fn http_get(h: &core::HttpGetAction) -> Value {
    Obj::new()
        .str("path", &h.path)
        .msg("port", &h.port, int_or_string)
        .str("host", &h.host)
        .str("scheme", &h.scheme)
        .list("httpHeaders", &h.http_headers, |x| Obj::new().str("name", &x.name).str("value", &x.value).done())
        .done()
}

pub(super) fn tcp_socket(t: &core::TcpSocketAction) -> Value {
    Obj::new().msg("port", &t.port, int_or_string).str("host", &t.host).done()
}

pub(super) fn exec(e: &core::ExecAction) -> Value {
    Obj::new().strs("command", &e.command).done()
}

pub(super) fn probe(p: &core::Probe) -> Value {
    let mut o = Obj::new();
    if let Some(h) = &p.handler {
        o = o
            .msg("exec", &h.exec, exec)
            .msg("httpGet", &h.http_get, http_get)
            .msg("tcpSocket", &h.tcp_socket, tcp_socket)
            .msg("grpc", &h.grpc, |g| Obj::new().int("port", &g.port).str("service", &g.service).done());
    }
    o.int0("initialDelaySeconds", &p.initial_delay_seconds)
        .int0("timeoutSeconds", &p.timeout_seconds)
        .int0("periodSeconds", &p.period_seconds)
        .int0("successThreshold", &p.success_threshold)
        .int0("failureThreshold", &p.failure_threshold)
        .int("terminationGracePeriodSeconds", &p.termination_grace_period_seconds)
        .done()
}

pub(super) fn lifecycle_handler(h: &core::LifecycleHandler) -> Value {
    Obj::new()
        .msg("exec", &h.exec, exec)
        .msg("httpGet", &h.http_get, http_get)
        .msg("tcpSocket", &h.tcp_socket, tcp_socket)
        .msg("sleep", &h.sleep, |s| Obj::new().int("seconds", &s.seconds).done())
        .done()
}

pub(super) fn se_linux_options(o: &core::SeLinuxOptions) -> Value {
    Obj::new().str("user", &o.user).str("role", &o.role).str("type", &o.r#type).str("level", &o.level).done()
}

pub(super) fn seccomp_profile(p: &core::SeccompProfile) -> Value {
    Obj::new().str("type", &p.r#type).str("localhostProfile", &p.localhost_profile).done()
}

pub(super) fn security_context(s: &core::SecurityContext) -> Value {
    Obj::new()
        .msg("capabilities", &s.capabilities, |c| Obj::new().strs("add", &c.add).strs("drop", &c.drop).done())
        .bool("privileged", &s.privileged)
        .msg("seLinuxOptions", &s.se_linux_options, se_linux_options)
        .int("runAsUser", &s.run_as_user)
        .int("runAsGroup", &s.run_as_group)
        .bool("runAsNonRoot", &s.run_as_non_root)
        .bool("readOnlyRootFilesystem", &s.read_only_root_filesystem)
        .bool("allowPrivilegeEscalation", &s.allow_privilege_escalation)
        .str("procMount", &s.proc_mount)
        .msg("seccompProfile", &s.seccomp_profile, seccomp_profile)
        .done()
}

pub(super) fn pod_security_context(s: &core::PodSecurityContext) -> Value {
    let groups: Vec<Value> = s.supplemental_groups.iter().map(|g| json!(g)).collect();
    let mut o = Obj::new()
        .msg("seLinuxOptions", &s.se_linux_options, se_linux_options)
        .int("runAsUser", &s.run_as_user)
        .int("runAsGroup", &s.run_as_group)
        .bool("runAsNonRoot", &s.run_as_non_root);
    if !groups.is_empty() {
        o = o.put("supplementalGroups", Value::Array(groups));
    }
    o.str("supplementalGroupsPolicy", &s.supplemental_groups_policy)
        .int("fsGroup", &s.fs_group)
        .list("sysctls", &s.sysctls, |x| Obj::new().str("name", &x.name).str("value", &x.value).done())
        .str("fsGroupChangePolicy", &s.fs_group_change_policy)
        .msg("seccompProfile", &s.seccomp_profile, seccomp_profile)
        .str("seLinuxChangePolicy", &s.se_linux_change_policy)
        .done()
}

pub(super) fn key_to_path(k: &core::KeyToPath) -> Value {
    Obj::new().str("key", &k.key).str("path", &k.path).int("mode", &k.mode).done()
}

pub(super) fn volume(v: &core::Volume) -> Value {
    let mut o = Obj::new().str("name", &v.name);
    if let Some(src) = &v.volume_source {
        o = o
            .msg("hostPath", &src.host_path, |h| Obj::new().str("path", &h.path).str("type", &h.r#type).done())
            .msg("emptyDir", &src.empty_dir, |e| {
                Obj::new().str("medium", &e.medium).msg("sizeLimit", &e.size_limit, quantity).done()
            })
            .msg("secret", &src.secret, |s| {
                Obj::new()
                    .str("secretName", &s.secret_name)
                    .list("items", &s.items, key_to_path)
                    .int("defaultMode", &s.default_mode)
                    .bool("optional", &s.optional)
                    .done()
            })
            .msg("persistentVolumeClaim", &src.persistent_volume_claim, |p| {
                Obj::new().str("claimName", &p.claim_name).bool0("readOnly", &p.read_only).done()
            })
            .msg("configMap", &src.config_map, |c| {
                named_optional(&c.local_object_reference, &c.optional)
                    .list("items", &c.items, key_to_path)
                    .int("defaultMode", &c.default_mode)
                    .done()
            })
            .msg("downwardAPI", &src.downward_api, |d| {
                Obj::new()
                    .list("items", &d.items, |f| {
                        Obj::new()
                            .str("path", &f.path)
                            .msg("fieldRef", &f.field_ref, object_field_selector)
                            .msg("resourceFieldRef", &f.resource_field_ref, resource_field_selector)
                            .int("mode", &f.mode)
                            .done()
                    })
                    .int("defaultMode", &d.default_mode)
                    .done()
            });
    }
    o.done()
}
