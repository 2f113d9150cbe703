"""URL map: pages, the admin, the REST API under /api/v1/ and its OpenAPI schema."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

APPS = ["orchestrator", "pool", "approvals", "credentials", "triggers", "notifications"]

api_patterns = [path("", include(f"{app}.api_urls")) for app in APPS] + [
    path("schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("", RedirectView.as_view(url="/chat/", permanent=False)),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include(api_patterns)),
    *[path("", include(f"{app}.urls")) for app in APPS],
]
