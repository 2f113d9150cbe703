"""OneValet settings: every value that differs between machines comes from the environment.

The README's configuration table lists each variable. A malformed value raises
``ConfigError`` naming the variable; ``manage.py`` prints that one line and exits.
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

from cryptography.fernet import Fernet

from onevalet_site.env import (
    ConfigError,
    check_redis_url,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
)

logger = logging.getLogger("onevalet.settings")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("ONEVALET_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", True)


def _secret_kept_under_var(filename: str, make: callable) -> str:
    """Development only: a secret generated once and kept in ``var/`` (mode 0600)."""
    path = VAR_DIR / filename
    if not path.exists():
        path.write_text(make())
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ConfigError("SECRET_KEY", "required when DEBUG is off (50+ random characters)")
    SECRET_KEY = _secret_kept_under_var("secret_key", lambda: secrets.token_urlsafe(50))

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / ReDoc assets served locally, never from a CDN
    "channels",
    "django_celery_beat",
    "orchestrator",
    "pool",
    "approvals",
    "credentials",
    "triggers",
    "notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files are served by daphne itself, also with DEBUG off: one process serves the
    # whole site and no separate web server is needed for /static/.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "onevalet_site.urls"
ASGI_APPLICATION = "onevalet_site.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

# --- Database -------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'onevalet.db'}"
DATABASES = {"default": database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker, channel layer, cache, event bus -----------------------------------
# Unset REDIS_URL means the embedded Redis (onevalet_site/embedded_redis.py) on a unix
# socket under VAR_DIR: the same clients and code paths as production, another address.
REDIS_URL = env_str("REDIS_URL")
EMBEDDED_REDIS = not REDIS_URL
if EMBEDDED_REDIS:
    REDIS_URL = f"unix://{VAR_DIR / 'redis.sock'}"
else:
    check_redis_url(REDIS_URL)


def _celery_url(redis_url: str) -> str:
    """Kombu spells a unix-socket Redis ``redis+socket://``; redis-py spells it ``unix://``."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url[len("unix://"):]
    return redis_url


# Redis pub/sub: a group send is one PUBLISH that every subscribed process receives at once.
# The list-based RedisChannelLayer delivered group messages to hundreds of sockets of one
# process through a single shared key and blocking pops: hints arrived in clumps, seconds
# late, or were dropped (bench/ws_load.py). Delivery is at most once either way; the user's
# event stream (orchestrator/event_store.py) is what makes it complete.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            # redis-py 8 caps a pool at 100 connections and times reads out after 5 s.
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "max_connections": 1000}],
            "prefix": env_str("ONEVALET_REDIS_PREFIX", "onevalet") + ":asgi",
        },
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("ONEVALET_REDIS_PREFIX", "onevalet"),
    }
}

CELERY_BROKER_URL = _celery_url(REDIS_URL)
CELERY_RESULT_BACKEND = _celery_url(REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Tasks are never scheduled with long countdowns (one-time work uses clocked schedules),
# so a visibility timeout of an hour only bounds how late a lost message is redelivered.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = env_str("TIME_ZONE", "UTC")

# --- Internationalisation -------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- Static files, auth ---------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns on every request while it is missing
STATICFILES_DIRS = [BASE_DIR / "static"]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/chat/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Security -------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the chat page's fetch() reads it for POSTs
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    if env_bool("SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ONEVALET_MAX_BODY_BYTES", 1_048_576, minimum=1024)

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "onevalet_site.pagination.OneValetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("ONEVALET_API_RATE", "600/minute"),
        # POST /api/v1/messages: each message costs LLM tokens.
        "messages": env_str("ONEVALET_MESSAGE_RATE", "60/minute"),
    },
    "EXCEPTION_HANDLER": "onevalet_site.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OneValet API",
    "DESCRIPTION": "Talk to your assistant, decide approvals, manage credentials and triggers.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- The assistant --------------------------------------------------------------------
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL") or None
ONEVALET_MODEL = env_str("ONEVALET_MODEL", "gpt-4o-mini")
ONEVALET_SYSTEM_PROMPT = env_str(
    "ONEVALET_SYSTEM_PROMPT",
    "You are Valet, a capable and discreet personal assistant. Be warm, brief and concrete. "
    "Use the tools you have when they help; say plainly when something failed.",
)
ONEVALET_LLM_TIMEOUT = env_float("ONEVALET_LLM_TIMEOUT", 60.0)
# Any ReactLoopConfig field, as JSON: ONEVALET_LOOP='{"max_turns": 12}'.
try:
    ONEVALET_LOOP = json.loads(env_str("ONEVALET_LOOP", "{}"))
except json.JSONDecodeError as exc:
    raise ConfigError("ONEVALET_LOOP", f"not valid JSON ({exc.msg})") from None
if not isinstance(ONEVALET_LOOP, dict):
    raise ConfigError("ONEVALET_LOOP", "must be a JSON object of ReactLoopConfig fields")
# Token deltas published within this many milliseconds reach sockets as one event (0: every delta).
ONEVALET_CHUNK_WINDOW_MS = env_int("ONEVALET_CHUNK_WINDOW_MS", 50, minimum=0)
# Websocket flow control: events in flight to a client that acknowledges them, at most.
ONEVALET_WS_MAX_UNACKED = env_int("ONEVALET_WS_MAX_UNACKED", 256, minimum=1)
# Modules whose @tool / @valet definitions are registered at start-up.
ONEVALET_TOOL_MODULES = env_list("ONEVALET_TOOL_MODULES", ["orchestrator.builtin_tools", "orchestrator.example_agents", "orchestrator.email_agent", "triggers.assistant_tools"])

# --- Credentials ----------------------------------------------------------------------
CREDENTIALS_KEYS = env_list("CREDENTIALS_KEYS", [])
if not CREDENTIALS_KEYS:
    if not DEBUG:
        raise ConfigError("CREDENTIALS_KEYS", "required when DEBUG is off (comma-separated Fernet keys, newest first)")
    CREDENTIALS_KEYS = [_secret_kept_under_var("credentials.key", lambda: Fernet.generate_key().decode())]
for _index, _key in enumerate(CREDENTIALS_KEYS):
    try:
        Fernet(_key)
    except (ValueError, TypeError):
        raise ConfigError("CREDENTIALS_KEYS", f"key #{_index + 1} is not a valid Fernet key (32 url-safe base64 bytes)") from None

# --- Mail -----------------------------------------------------------------------------
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "onevalet@localhost")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)

# --- Logging --------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "openai": {"level": "WARNING"},
    },
}
