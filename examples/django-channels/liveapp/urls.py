from django.urls import path

from rooms import handoff, views

urlpatterns = [
    path("", views.index),
    path("game/<str:room>/", views.game),  # roomgate's room.pagePaths: /game/{room}/
    path("_example/rooms/<str:room>/", views.room_state),  # what this process holds of a room (tests only)
    # ROOMGATE: roomgate's calls to this process
    path("_roomgate/push", views.push_receiver),  # roomgate's push.path (never reachable through roomgate)
    path("_roomgate/handoff/<str:step>", handoff.hook),  # roomgate's handoff.path (the same rule)
]
