"""The SQLAlchemy shop the Flask composition and counter tests read from (SQLite in memory)."""

from __future__ import annotations

from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool


class Base(DeclarativeBase):
    pass


class Product(Base):
    __tablename__ = "products"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))
    views: Mapped[int] = mapped_column(default=0)


class Article(Base):
    """Its view count lives in a column of another name (``MCACHE_VIEW_COUNT_FIELDS``)."""

    __tablename__ = "articles"
    id: Mapped[int] = mapped_column(primary_key=True)
    hits: Mapped[int] = mapped_column(default=0)


def sessions() -> sessionmaker:
    """Return a sessionmaker on a new in-memory database every thread shares."""
    engine = create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )
    Base.metadata.create_all(engine)
    return sessionmaker(engine)
