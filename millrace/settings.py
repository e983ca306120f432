"""Settings of the Millrace project: the control center, the registry and the REST proxy.

Every setting comes from an environment variable read here, through the typed helpers
below; the embedded defaults (built-in cluster, SQLite, local Spark, no external server)
are what a fresh machine gets. Nothing else in the project reads the environment at import
time: the apps read settings through `django.conf.settings`, never this module.
"""

import os
import sys
from pathlib import Path

import dj_database_url

from clusterclient.clusters import connect_urls, extra_clusters

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return default if raw is None or raw == "" else int(raw)


def read_properties(path: Path) -> dict[str, str]:
    """A librdkafka / Java properties file's `key=value` lines (no escapes or continuations:
    what `platform --secure` writes and kcat reads)."""
    config = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
    return config


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_prefix(name: str, default: str) -> str:
    """A URL prefix without a leading slash and with one trailing slash ('' for root)."""
    value = env_str(name, default).strip("/")
    return f"{value}/" if value else ""


# Where the embedded platform keeps its state: SQLite, broker logs, Celery's queue folder.
DATA_DIR = Path(env_str("MILLRACE_DATA_DIR", str(BASE_DIR / "var"))).resolve()

SECRET_KEY = env_str("DJANGO_SECRET_KEY", "millrace-dev-insecure-key-change-me-in-production")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")

INSTALLED_APPS = [
    # daphne's app only gives `manage.py runserver` an ASGI server (the platform serves with
    # uvicorn, millrace/webserver.py); importing it (Twisted) cost every Django process
    # about 0.4 s of CPU, a platform start a dozen of them, so only runserver installs it.
    *(["daphne"] if sys.argv[1:2] == ["runserver"] else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # API tokens for /api/v1/ and the lag metrics
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_celery_results",
    # The project is an app too, for its management commands (`platform`, `failover_demo`).
    "millrace",
    "controlcenter",
    "registry",
    "restproxy",
]

MIDDLEWARE = [
    "millrace.ports.PortRoutingMiddleware",
    "httpauth.middleware.BasicAuthMiddleware",
    "millrace.index.IndexPageMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "controlcenter.clusters.ClusterMiddleware",
    "controlcenter.access.PageLoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# The registry and the REST proxy are served with these instead (asgi.py): async only, so a
# request never waits for Django's one sync thread.
API_MIDDLEWARE = [
    "millrace.ports.PortRoutingMiddleware",
    "httpauth.middleware.BasicAuthMiddleware",
    "millrace.index.IndexPageMiddleware",
    "millrace.api_middleware.ContentLengthMiddleware",
]

ROOT_URLCONF = "millrace.urls"
ASGI_APPLICATION = "millrace.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so that live-server tests share it across processes.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = str(DATA_DIR / "test-db.sqlite3")
    # IMMEDIATE: a write transaction takes the lock when it begins, so concurrent writers
    # wait (up to the timeout) instead of failing on a lock upgrade.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "frontend"]

# --- Control center access (controlcenter/access.py) --------------------------------------
# Off: pages are public and read-only for anonymous visitors; every state change still
# needs a signed-in user with permission. On: every page needs a signed-in user.
MILLRACE_UI_LOGIN_REQUIRED = env_bool("MILLRACE_UI_LOGIN_REQUIRED", False)
# The password `ensure_admin` gives the `admin` account it creates on first start;
# empty: a random one, printed once.
MILLRACE_ADMIN_PASSWORD = env_str("MILLRACE_ADMIN_PASSWORD", "")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# --- Kafka: the platform reaches brokers only through a Kafka client ---------------------
# The built-in cluster `make run` starts: three brokers from port 9092.
KAFKA_BOOTSTRAP_SERVERS = env_str(
    "KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
)
# A librdkafka properties file (security.protocol, sasl.*, ssl.ca.location ...) whose keys
# every Kafka client of the platform adds to its own: `platform --secure` points it at the
# services' SASL_SSL login (millrace/README.md, "A secured platform"). Empty: none.
MILLRACE_KAFKA_CLIENT_CONFIG = env_str("MILLRACE_KAFKA_CLIENT_CONFIG", "")
KAFKA_CLIENT_CONFIG: dict[str, str] = {
    key: value for key, value in (
        read_properties(Path(MILLRACE_KAFKA_CLIENT_CONFIG))
        if MILLRACE_KAFKA_CLIENT_CONFIG else {}).items()
    if key != "bootstrap.servers"  # KAFKA_BOOTSTRAP_SERVERS says where
}
# More clusters than the default one above (clusterclient/clusters.py; README "Several
# clusters"): `name=bootstrap` pairs, and/or a Control Center-style properties file. Code
# lists them all, the default first, with clusterclient.clusters.from_settings(settings).
# MILLRACE_CLUSTER_CLIENT_CONFIGS: `name=path` pairs, a librdkafka properties file of a
# cluster's login, as MILLRACE_KAFKA_CLIENT_CONFIG is the default's (`platform --secure
# --clusters N` names each built-in cluster's).
KAFKA_EXTRA_CLUSTERS = extra_clusters(env_str("MILLRACE_CLUSTERS", ""),
                                      env_str("MILLRACE_CLUSTERS_FILE", ""), DATA_DIR,
                                      env_str("MILLRACE_CLUSTER_CLIENT_CONFIGS", ""))
# `manage.py platform --secure` (or MILLRACE_SECURE=1): the secured built-in cluster.
MILLRACE_SECURE = env_bool("MILLRACE_SECURE", False)
# The platform's own service principals (user names; `platform --secure` sets them): the
# Security pages refuse to change or delete their SCRAM credentials, as they do the
# control center's own login.
MILLRACE_SERVICE_PRINCIPALS = tuple(
    name.strip() for name in env_str("MILLRACE_SERVICE_PRINCIPALS", "").split(",")
    if name.strip())

# --- The collector (controlcenter/README.md, "The collector") -----------------------------
MILLRACE_COLLECT_INTERVAL_S = float(env_str("MILLRACE_COLLECT_INTERVAL_S", "5"))
MILLRACE_COLLECTOR_METRICS_HOST = env_str("MILLRACE_COLLECTOR_METRICS_HOST", "127.0.0.1")
MILLRACE_COLLECTOR_METRICS_PORT = env_int("MILLRACE_COLLECTOR_METRICS_PORT", 9308)
# The built-in cluster's data dir, where its supervisor's control socket lives.
MILLRACE_CLUSTER_DIR = env_str("MILLRACE_CLUSTER_DIR", str(DATA_DIR / "cluster"))
# The default cluster's name (the cluster switcher, REST proxy logs) and the cluster_name
# label of its lag metrics (kafka-lag-exporter's).
MILLRACE_CLUSTER_NAME = env_str("MILLRACE_CLUSTER_NAME", "millrace")
# laganalysis.retention.Policy.parse: every point for an hour, one a minute for a week.
MILLRACE_LAG_HISTORY_RETENTION = env_str("MILLRACE_LAG_HISTORY_RETENTION", "1h=raw,7d=1m")

# --- Ports and prefixes: one server, with the registry and proxy also at their own ports ---
WEB_PORT = env_int("MILLRACE_WEB_PORT", 8000)
REGISTRY_PORT = env_int("MILLRACE_REGISTRY_PORT", 8081)
RESTPROXY_PORT = env_int("MILLRACE_RESTPROXY_PORT", 8082)
# The platform's Kafka Connect worker (connect/, its own process): Kafka's REST port
CONNECT_PORT = env_int("MILLRACE_CONNECT_PORT", 8083)
# Where the control center's Connect page reaches the worker's REST API (any worker of the
# group: followers forward to the leader)
MILLRACE_CONNECT_URL = env_str("MILLRACE_CONNECT_URL", f"http://127.0.0.1:{CONNECT_PORT}")
# The Basic credentials ("user:password", as Confluent's basic.auth.user.info) the control
# center sends to that REST API; empty: its own Kafka login (KAFKA_CLIENT_CONFIG's
# sasl.username and sasl.password) when it has one, as under `platform --secure`, where
# the worker asks HTTP Basic of the cluster's SCRAM users (connect/README.md).
MILLRACE_CONNECT_USER_INFO = env_str("MILLRACE_CONNECT_USER_INFO", "")
# Each cluster's Connect worker, by cluster name (clusterclient/clusters.py): `name=url`
# pairs (`platform --clusters N` sets them) and the clusters file's Control Center lines
# `confluent.controlcenter.connect.<name>.cluster=<url>`; the default's may be named too.
KAFKA_CONNECT_URLS = connect_urls(env_str("MILLRACE_CONNECT_URLS", ""),
                                  env_str("MILLRACE_CLUSTERS_FILE", ""))
REGISTRY_PREFIX = env_prefix("MILLRACE_REGISTRY_PREFIX", "schema-registry")
RESTPROXY_PREFIX = env_prefix("MILLRACE_RESTPROXY_PREFIX", "kafka")
# Web server worker processes (millrace/webserver.py); default: one per core
WEB_WORKERS = env_int("MILLRACE_WEB_WORKERS", len(os.sched_getaffinity(0)))

# TLS on the registry's and the REST proxy's own ports (millrace/webserver.py): a PEM
# certificate (chain; it may hold the key) and its key. Empty: plain HTTP. The control
# center's port and the APIs' prefixes on it stay plain. `platform --secure` sets them.
MILLRACE_HTTP_TLS_CERT = env_str("MILLRACE_HTTP_TLS_CERT", "")
MILLRACE_HTTP_TLS_KEY = env_str("MILLRACE_HTTP_TLS_KEY", "")
# The CA the platform's own HTTP clients trust for those ports (the proxy's registry
# client); empty: the system's CAs.
MILLRACE_HTTP_TLS_CA = env_str("MILLRACE_HTTP_TLS_CA", "")

# --- REST proxy: where clients reach it, where the registry is, consumer-instance limits ---
SCHEMA_REGISTRY_URL = env_str("SCHEMA_REGISTRY_URL", f"http://127.0.0.1:{REGISTRY_PORT}")
# The Basic login ("user:password", Confluent's basic.auth.user.info) the stream queries'
# registry clients send; empty: the platform's own Kafka login (KAFKA_CLIENT_CONFIG's
# sasl.username and sasl.password) when it has one, as under `platform --secure`. Their CA
# is MILLRACE_HTTP_TLS_CA (controlcenter/streams/supervise.py, registry_config).
SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO = env_str("SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO", "")
# base_uri of consumer instances; empty: built from the request's host
RESTPROXY_ADVERTISED_URL = env_str("RESTPROXY_ADVERTISED_URL", "")
# How other proxy processes reach this one (consumer-instance forwarding); empty: advertised
RESTPROXY_INTERNAL_URL = env_str("RESTPROXY_INTERNAL_URL", "")
RESTPROXY_CONSUMER_INSTANCE_TIMEOUT_MS = env_int("RESTPROXY_CONSUMER_INSTANCE_TIMEOUT_MS", 300000)
RESTPROXY_CONSUMER_REQUEST_TIMEOUT_MS = env_int("RESTPROXY_CONSUMER_REQUEST_TIMEOUT_MS", 1000)
RESTPROXY_CONSUMER_MAX_BYTES = env_int("RESTPROXY_CONSUMER_MAX_BYTES", 64 * 1024 * 1024)
RESTPROXY_MAX_REQUEST_BYTES = env_int("RESTPROXY_MAX_REQUEST_BYTES", 64 * 1024 * 1024)
RESTPROXY_V3_BATCH_MAX_ENTRIES = env_int("RESTPROXY_V3_BATCH_MAX_ENTRIES", 10)
# With MILLRACE_HTTP_AUTH the proxy talks to Kafka as each caller: how long one caller's
# producer and admin client are kept after their last use.
RESTPROXY_PRINCIPAL_CLIENT_IDLE_S = float(env_str("RESTPROXY_PRINCIPAL_CLIENT_IDLE_S", "300"))

# --- HTTP Basic on the registry and the REST proxy (httpauth/README.md) -------------------
# The one switch: on, both APIs (and their fast lanes) answer 401 without the credentials of
# one of the cluster's SCRAM users, verified by logging in to the cluster as them.
MILLRACE_HTTP_AUTH = env_bool("MILLRACE_HTTP_AUTH", False)
MILLRACE_HTTP_AUTH_REALM = env_str("MILLRACE_HTTP_AUTH_REALM", "millrace")
# The cluster's SASL listener for those logins (empty: KAFKA_BOOTSTRAP_SERVERS), its
# security.protocol, mechanism and CA file (PEM; for SASL_SSL).
MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS = env_str("MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS", "")
MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL = env_str("MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL",
                                               "SASL_PLAINTEXT")
MILLRACE_HTTP_AUTH_SASL_MECHANISM = env_str("MILLRACE_HTTP_AUTH_SASL_MECHANISM", "SCRAM-SHA-512")
MILLRACE_HTTP_AUTH_SSL_CA_LOCATION = env_str("MILLRACE_HTTP_AUTH_SSL_CA_LOCATION", "")
# How long an accepted login is trusted without asking the cluster again, and how long a
# login may take before the request is answered 503.
MILLRACE_HTTP_AUTH_CACHE_S = float(env_str("MILLRACE_HTTP_AUTH_CACHE_S", "60"))
MILLRACE_HTTP_AUTH_TIMEOUT_S = float(env_str("MILLRACE_HTTP_AUTH_TIMEOUT_S", "10"))
# A Karapace authfile: its users log in to the registry and its permissions decide per
# subject and for the global config (read, write). Empty: every registry user may do all.
MILLRACE_REGISTRY_AUTHFILE = env_str("MILLRACE_REGISTRY_AUTHFILE", "")

# --- Redis: when set, Channels, Celery and the cache use it --------------------------------
REDIS_URL = env_str("REDIS_URL", "")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # Deployments (and tests) sharing one Redis keep their keys apart with this.
            "KEY_PREFIX": env_str("MILLRACE_CACHE_PREFIX", ""),
        }
    }
else:
    # Shared by the collector and every web worker without a server (millrace/README.md).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "millrace.channelhub.HubChannelLayer",
            "CONFIG": {"data_dir": str(DATA_DIR), "name": env_str("MILLRACE_CHANNEL_HUB", "")},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(DATA_DIR / "cache"),
        }
    }

# --- Celery: filesystem queue on one machine, Redis when REDIS_URL is set -------------------
CELERY_QUEUE_DIR = DATA_DIR / "celery-queue"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
_FILE_QUEUE = CELERY_BROKER_URL.startswith("filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {}
    if not _FILE_QUEUE
    else {
        "data_folder_in": str(CELERY_QUEUE_DIR),
        "data_folder_out": str(CELERY_QUEUE_DIR),
        "control_folder": str(CELERY_QUEUE_DIR / "control"),
    }
)
# The filesystem queue through our transport, which writes each message file whole
# (millrace/queuefiles.py); any other URL names its transport itself.
MILLRACE_FILE_QUEUE_TRANSPORT = "millrace.queuefiles:Transport"
CELERY_BROKER_TRANSPORT = MILLRACE_FILE_QUEUE_TRANSPORT if _FILE_QUEUE else None
CELERY_RESULT_BACKEND = "django-db"
# The longest the worker's timer thread sleeps (Celery's default 1 s); its warm shutdown
# waits for that thread to wake (millrace/README.md, "Stopping").
CELERY_WORKER_TIMER_PRECISION = 0.2

# --- Lag analytics: where laganalysis.run jobs run and write their scratch files ----------
# local[*] on this machine; spark://host:7077 sends the same jobs to a standalone cluster.
SPARK_MASTER_URL = env_str("SPARK_MASTER_URL", "local[*]")
MILLRACE_ANALYSIS_DIR = DATA_DIR / "analysis"
# Analyses run at once by the platform's worker; each local[*] job already uses every core.
MILLRACE_ANALYSIS_CONCURRENCY = env_int("MILLRACE_ANALYSIS_CONCURRENCY", 1)
# The Celery queue analyses go to (the platform's worker consumes it: `-Q`).
MILLRACE_ANALYSIS_QUEUE = env_str("MILLRACE_ANALYSIS_QUEUE", "analytics")
# One beat entry: launch the analysis schedules that are due (AnalysisSchedule rows), looking
# every MILLRACE_SCHEDULE_CHECK_S seconds (schedules' own intervals are whole minutes).
MILLRACE_SCHEDULE_CHECK_S = env_int("MILLRACE_SCHEDULE_CHECK_S", 60)
# --- Stream queries (controlcenter/streams/): each running query's Celery task holds one
# thread of the streams worker for the query's life and runs its Spark driver as a child.
MILLRACE_STREAMS_DIR = DATA_DIR / "streams"  # <name>/checkpoint, <name>/driver.log
MILLRACE_STREAMS_QUEUE = env_str("MILLRACE_STREAMS_QUEUE", "streams")
MILLRACE_STREAMS_CONCURRENCY = env_int("MILLRACE_STREAMS_CONCURRENCY", 8)  # queries at once
MILLRACE_STREAMS_MASTER = env_str("MILLRACE_STREAMS_MASTER", "local[2]")  # each query's driver
# The web process's one session for validation and ad-hoc queries.
MILLRACE_STREAMS_SQL_MASTER = env_str("MILLRACE_STREAMS_SQL_MASTER", "local[2]")
MILLRACE_STREAMS_SUPERVISE_S = env_int("MILLRACE_STREAMS_SUPERVISE_S", 15)

CELERY_BEAT_SCHEDULE = {
    "launch-due-analyses": {"task": "controlcenter.tasks.launch_due_analyses_task",
                            "schedule": float(MILLRACE_SCHEDULE_CHECK_S),
                            "options": {"queue": MILLRACE_ANALYSIS_QUEUE}},
    "resume-stream-queries": {"task": "controlcenter.tasks.resume_stream_queries_task",
                              "schedule": float(MILLRACE_STREAMS_SUPERVISE_S),
                              "options": {"queue": MILLRACE_STREAMS_QUEUE}},
}

# --- REST framework and OpenAPI (served without a CDN) -------------------------------------
REST_FRAMEWORK: dict[str, object] = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    # Every JSON API answers errors as Confluent's {"error_code", "message"} (apierrors/).
    "EXCEPTION_HANDLER": "apierrors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Millrace",
    "DESCRIPTION": "The control center's JSON API (cluster, topics, messages, consumer groups, "
    "schemas): what its pages show and do.",
    "VERSION": "0.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    # Three read models have a `status` of their own choices: each enum keeps its model's name.
    "ENUM_NAME_OVERRIDES": {
        "BrokerStatusEnum": "controlcenter.models.BrokerStatus",
        "LagStatusEnum": "controlcenter.models.BurrowStatus",
        "AnalysisStatusEnum": "controlcenter.models.AnalysisStatus",
    },
    # Two linked documents in one Swagger UI (a selector at the top): the registry's and the
    # REST proxy's maintained description (millrace/openapi.py), and the control
    # center's JSON API as drf-spectacular reads it from its DRF views.
    "SWAGGER_UI_SETTINGS": {
        "urls": [
            {"url": "/api/schema/", "name": "Schema registry and REST proxy"},
            {"url": "/api/v1/schema/", "name": "Control center API (/api/v1/)"},
        ],
    },
}

LOG_LEVEL = env_str("MILLRACE_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
}

DATA_DIR.mkdir(parents=True, exist_ok=True)
# kombu's filesystem transport creates only the last folder of its paths.
(CELERY_QUEUE_DIR / "control").mkdir(parents=True, exist_ok=True)
