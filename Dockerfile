# The SearchTome scoring service (docs/server.md). Build from the repository root:
#   docker build -t searchtome-server .
# The server home (SRV: settings, both dataset halves, the SQLite file) lives in a volume:
#   docker run --rm -v srv:/srv/searchtome searchtome-server init --home /srv/searchtome/home \
#       --public /srv/searchtome/in/public --private /srv/searchtome/in/private
#   docker run -d -p 127.0.0.1:8000:8000 -v srv:/srv/searchtome searchtome-server
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 SEARCHTOME_NO_PROGRESS=1
WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY searchtome ./searchtome
COPY baselines ./baselines
# The light core plus the server extra: no torch, no model weights.
RUN pip install --no-cache-dir ".[server]" \
    && useradd --system --create-home --home-dir /srv/searchtome searchtome
USER searchtome
VOLUME /srv/searchtome
EXPOSE 8000
ENTRYPOINT ["searchtome", "server"]
CMD ["run", "--home", "/srv/searchtome/home", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
